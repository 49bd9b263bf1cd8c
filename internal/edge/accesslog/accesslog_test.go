package accesslog_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
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

// Log writes the line slog's JSON handler writes for the same request,
// byte for byte, escapes included.
func TestLogMatchesSlog(t *testing.T) {
	at := time.Date(2026, 12, 3, 19, 28, 47, 174_000_000, time.UTC)
	entries := []accesslog.Entry{
		{Time: at, Method: "GET", Host: "echo.example", Path: "/", Code: 200, Route: "demo/echo/0", Backend: "demo/echo", Cluster: "east", Duration: 1234567},
		{Time: at.Add(999 * time.Microsecond), Method: "POST", Host: "x:8080", Path: "/a b/\"q\"\\", Code: 503, Duration: 0},
		{Time: at.Add(time.Nanosecond), Path: "/ctl\x00\x01\x1f\t\r\n<&>\x7f", Host: "\u2028\u2029é😀", Route: "bad\xff\xfeutf8", Code: 404},
		{Time: at.In(time.FixedZone("x", 5*3600+1800)), Method: "HEAD", Path: strings.Repeat("/long", 100), Code: 304, Duration: -1},
	}
	for i, e := range entries {
		var want bytes.Buffer
		rec := slog.NewRecord(e.Time, slog.LevelInfo, "request", 0)
		rec.AddAttrs(slog.String("method", e.Method), slog.String("host", e.Host), slog.String("path", e.Path), slog.Int("code", e.Code),
			slog.String("route", e.Route), slog.String("backend", e.Backend), slog.String("cluster", e.Cluster), slog.Duration("duration", e.Duration))
		if err := slog.NewJSONHandler(&want, nil).Handle(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		for _, opts := range []accesslog.Options{{}, {Buffer: 4096}} {
			out := &sink{}
			w := accesslog.New(out, opts)
			w.Log(&e)
			_ = w.Close()
			if got := out.buf.String(); got != want.String() {
				t.Errorf("entry %d (buffer %d):\n got %s\nwant %s", i, opts.Buffer, got, want.String())
			}
		}
	}
}

// BenchmarkLog compares a request's line through Log with the same line
// through slog onto the same Writer.
func BenchmarkLog(b *testing.B) {
	w := accesslog.New(io.Discard, accesslog.Options{Buffer: 64 << 10, Flush: time.Second})
	b.Cleanup(func() { _ = w.Close() })
	e := accesslog.Entry{Time: time.Now(), Method: "GET", Host: "echo.example:8080", Path: "/some/path", Code: 200,
		Route: "demo/echo/0", Backend: "demo/echo", Cluster: "east", Duration: 1234567}
	b.Run("Log", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Log(&e)
		}
	})
	b.Run("slog", func(b *testing.B) {
		log := w.Logger()
		b.ReportAllocs()
		for b.Loop() {
			log.Info("request", "method", e.Method, "host", e.Host, "path", e.Path, "code", e.Code,
				"route", e.Route, "backend", e.Backend, "cluster", e.Cluster, "duration", e.Duration)
		}
	})
}
