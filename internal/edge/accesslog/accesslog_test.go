package accesslog_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/edge/accesslog"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// sink records writes; block holds them until released.
type sink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	block  chan struct{}
}

func (s *sink) Write(p []byte) (int, error) {
	if s.block != nil {
		<-s.block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.buf.Write(p)
}

func (s *sink) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.buf.String(), "\n"), "\n")
}

// count is the number of whole lines written.
func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Count(s.buf.Bytes(), []byte("\n"))
}

func TestWriter(t *testing.T) {
	tests := []struct {
		name string
		opts accesslog.Options
		// lines written before Close, without waiting for a flush
		// interval longer than the test
		wantBeforeClose int
	}{
		{"unbuffered: each line at once", accesslog.Options{}, 10},
		// A line is about 80 bytes: every full buffer is written at
		// once; the last line may wait in a buffer it did not fill.
		{"buffer filled: written at once", accesslog.Options{Buffer: 100, Flush: time.Hour}, 9},
		{"buffer not filled: written at the flush", accesslog.Options{Buffer: 1 << 20, Flush: 50 * time.Millisecond}, 10},
		{"buffer not filled, no flush yet: written at Close", accesslog.Options{Buffer: 1 << 20, Flush: time.Hour}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &sink{}
			w := accesslog.New(out, tt.opts)
			log := w.Logger()
			for i := range 10 {
				log.Info("request", "n", i)
			}
			if tt.wantBeforeClose > 0 {
				testkit.Eventually(t, 5*time.Second, fmt.Sprintf("%d lines written", tt.wantBeforeClose), func(context.Context) error {
					if n := out.count(); n < tt.wantBeforeClose {
						return fmt.Errorf("%d lines", n)
					}
					return nil
				})
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			lines := out.lines()
			if len(lines) != 10 {
				t.Fatalf("%d lines after Close, want 10:\n%s", len(lines), strings.Join(lines, "\n"))
			}
			for i, l := range lines {
				if !strings.Contains(l, fmt.Sprintf(`"n":%d`, i)) {
					t.Fatalf("line %d is %q", i, l)
				}
			}
		})
	}
}

// An output that does not keep up costs lines, not request time: a write
// past the bound returns at once and is counted.
func TestWriterDropsWhenBehind(t *testing.T) {
	out := &sink{block: make(chan struct{})}
	w := accesslog.New(out, accesslog.Options{Buffer: 64, Flush: time.Millisecond, Max: 256})
	before := testutil.ToFloat64(accesslog.Dropped)
	line := []byte(strings.Repeat("x", 63) + "\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			_, _ = w.Write(line)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("writes waited for a blocked output")
	}
	if dropped := testutil.ToFloat64(accesslog.Dropped) - before; dropped < 90 {
		t.Fatalf("%v lines dropped of 100 with room for 4, want at least 90", dropped)
	}
	close(out.block)
	_ = w.Close()
}
