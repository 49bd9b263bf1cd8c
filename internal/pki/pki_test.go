package pki_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetnet/fleetnet/internal/pki"
)

// Write leaves the key file 0600 and the certificate 0644 whether it
// creates them or replaces files that were there with other modes
// (os.WriteFile would keep those), and writes the new pair.
func TestWriteModes(t *testing.T) {
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		existing os.FileMode // 0: no files before
		before   []byte
	}{
		{"new files", 0, nil},
		{"a key file readable by all", 0o644, []byte("old key")},
		{"a key file writable by all", 0o666, []byte("old key")},
		{"files only the owner may read", 0o400, []byte("old key")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.existing != 0 {
				for _, f := range []string{"ca.crt", "ca.key"} {
					p := filepath.Join(dir, f)
					if err := os.WriteFile(p, tt.before, tt.existing); err != nil {
						t.Fatal(err)
					}
					// WriteFile's mode is subject to the umask.
					if err := os.Chmod(p, tt.existing); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := ca.Write(dir, "ca"); err != nil {
				t.Fatal(err)
			}
			for f, want := range map[string]struct {
				mode os.FileMode
				data []byte
			}{"ca.key": {0o600, ca.KeyPEM}, "ca.crt": {0o644, ca.CertPEM}} {
				p := filepath.Join(dir, f)
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != want.mode {
					t.Errorf("%s: mode %#o, want %#o", f, got, want.mode)
				}
				if data, err := os.ReadFile(p); err != nil || !bytes.Equal(data, want.data) {
					t.Errorf("%s: %v, not the pair written", f, err)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
