package containerlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// t0 is the time of the first record in tests.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// ts is the text of t0 plus sec seconds, as records and prefixes show it.
func ts(sec int) string {
	return t0.Add(time.Duration(sec) * time.Second).Format(timeFormat)
}

// ticker is a clock that moves one second at each reading.
type ticker struct{ next time.Time }

func newTicker() *ticker { return &ticker{next: t0} }

func (c *ticker) now() time.Time {
	t := c.next
	c.next = c.next.Add(time.Second)
	return t
}

// step is one action on a Writer.
type step struct {
	stream string
	data   string
	// close closes the stream instead of writing.
	close bool
}

// writeLog writes steps to a new log file through a Writer whose clock
// ticks once per written batch, closes it and returns the file's path.
func writeLog(t *testing.T, maxLine int, steps []step) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c", "0.log")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Now = newTicker().now
	w.MaxLine = maxLine
	streams := map[string]interface {
		Write([]byte) (int, error)
		Close() error
	}{}
	for _, s := range steps {
		st, ok := streams[s.stream]
		if !ok {
			st = w.Stream(s.stream)
			streams[s.stream] = st
		}
		if s.close {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if n, err := st.Write([]byte(s.data)); err != nil || n != len(s.data) {
			t.Fatalf("write %q to %s: %d, %v", s.data, s.stream, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeFile writes a log file of the given content and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// lines joins records, each ending with a newline.
func lines(records ...string) string {
	var b strings.Builder
	for _, r := range records {
		b.WriteString(r)
		b.WriteByte('\n')
	}
	return b.String()
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline with what describe reports.
func waitFor(t *testing.T, what string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; have %s", what, describe())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// quote shows a string in failure messages.
func quote(s string) string { return fmt.Sprintf("%q", s) }
