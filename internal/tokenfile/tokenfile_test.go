package tokenfile

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetnet/fleetnet/internal/testkit"
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
		{"an empty name", "# c\n" + a + ",,admin\n", nil, "line 2: the name is empty"},
		{"a name of blanks", a + ", ,cluster\n", nil, "line 1: the name is empty"},
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

// TestLoadRefusesEmptyNames: a line whose name is empty is refused at
// load, whatever its role; the servers never see a nameless identity.
func TestLoadRefusesEmptyNames(t *testing.T) {
	for _, tt := range []struct{ name, line string }{
		{"admin", "aaaaaaaaaaaaaaaa,,admin"},
		{"cluster", "aaaaaaaaaaaaaaaa,,cluster"},
		{"blank", "aaaaaaaaaaaaaaaa,  ,admin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens.csv")
			if err := os.WriteFile(path, []byte("bbbbbbbbbbbbbbbb,east,cluster\n"+tt.line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if got, err := Load(path, "cluster", "admin"); err == nil || !strings.Contains(err.Error(), path+": line 2: the name is empty") {
				t.Errorf("Load = %v, %v; want the empty name refused", got, err)
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

// Watch reloads a changed file, keeps the tokens in use when the new
// content does not load, and reloads again once it does.
func TestWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	// Each content replaces the file whole, as a Secret's volume does: a
	// truncated file seen at two looks of a loaded machine would load as
	// no tokens (what Watch's "held still" guard is for, not this test).
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path+".new", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write("0123456789abcdef,alice,admin\n")
	var mu sync.Mutex
	var names []string
	current := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(names)
	}
	reload := func() error {
		entries, err := Load(path, "admin", "reader")
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		names = nil
		for _, e := range entries {
			names = append(names, e.Name)
		}
		return nil
	}
	if err := reload(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	Watch(ctx, path, 5*time.Millisecond, reload, slog.New(slog.DiscardHandler))

	write("0123456789abcdef,alice,admin\nfedcba9876543210,bob,reader\n")
	testkit.Until(t, 10*time.Second, "bob added", func() bool { return slices.Contains(current(), "bob") })
	write("short,carol,admin\n")      // refused: too short
	time.Sleep(30 * time.Millisecond) // several looks; nothing to poll for
	if got := current(); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("a file that does not load replaced the tokens: %v", got)
	}
	write("fedcba9876543210,bob,reader\n")
	testkit.Until(t, 10*time.Second, "alice removed", func() bool { return slices.Equal(current(), []string{"bob"}) })
}
