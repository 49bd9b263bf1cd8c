package tokenfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	const a, b = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	tests := []struct {
		name    string
		in      string
		want    []Entry
		wantErr string
	}{
		{"entries with their lines, comments counted", "# tokens\n" + a + ",east,cluster\n\n# admins\n" + b + ",ops,admin\n",
			[]Entry{{a, "east", "cluster", 2}, {b, "ops", "admin", 5}}, ""},
		{"empty", "", nil, ""},
		{"a role not allowed", "# c\n" + a + ",east,root\n", nil, `line 2 (east): role "root" is not one of cluster, admin`},
		{"short token", "# c\nshort,east,cluster\n", nil, "line 2 (east): the token is shorter than 16 characters"},
		{"the same token twice", a + ",east,cluster\n# c\n" + a + ",west,cluster\n", nil, "line 3 (west): the token of line 1 is given again"},
		{"a field missing", "# c\n" + a + ",east\n", nil, "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in), "cluster", "admin")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), a) {
					t.Errorf("the error shows the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("x,east,cluster\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, "cluster"); err == nil || !strings.Contains(err.Error(), path+": line 1 (east)") {
		t.Errorf("error %v does not name the file and line", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), "cluster"); err == nil {
		t.Error("a missing file was read")
	}
}
