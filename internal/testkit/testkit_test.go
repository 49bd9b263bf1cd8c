package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the
// test: Fatalf ends only the goroutine, as the real one does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// failure runs fn with a recorder and returns what it failed with.
func failure(fn func(t testing.TB)) string {
	r := &recorder{}
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		fn(r)
	}()
	return r.failed
}

func TestEventually(t *testing.T) {
	n := 0
	got := failure(func(t testing.TB) {
		Eventually(t, time.Second, "the third call", func(context.Context) error {
			if n++; n < 3 {
				return fmt.Errorf("call %d", n)
			}
			return nil
		})
	})
	if got != "" || n != 3 {
		t.Errorf("failed with %q after %d calls, want no failure after 3", got, n)
	}

	start := time.Now()
	got = failure(func(t testing.TB) {
		Eventually(t, 100*time.Millisecond, "the impossible", func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline on the check's context")
			}
			return errors.New("still impossible")
		})
	})
	if want := "waited 100ms for the impossible: still impossible"; got != want {
		t.Errorf("failed with %q, want %q", got, want)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("gave up after %s, want about 100ms", d)
	}
}

func TestUntil(t *testing.T) {
	got := failure(func(t testing.TB) {
		Until(t, 50*time.Millisecond, "the endpoint to be healthy", func() bool { return false })
	})
	if want := "waited 50ms for the endpoint to be healthy"; got != want {
		t.Errorf("failed with %q, want %q", got, want)
	}
	n := 0
	if got := failure(func(t testing.TB) { Until(t, time.Second, "two calls", func() bool { n++; return n == 2 }) }); got != "" {
		t.Errorf("failed with %q", got)
	}
}

func TestPoll(t *testing.T) {
	err := Poll(context.Background(), 50*time.Millisecond, func(context.Context) error { return errors.New("refused") })
	if err == nil || err.Error() != "after 50ms: refused" {
		t.Errorf("Poll = %v, want the last error after the timeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Poll(ctx, time.Minute, func(context.Context) error { return errors.New("refused") }); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestFreePorts(t *testing.T) {
	ports := FreePorts(t, 20)
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
	}
	// Picked one at a time and bound later, as tests do: still distinct
	// (1,000 random picks from about 4,500 ports would repeat one).
	for range 1000 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	addr := FreeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("FreeAddr %s: %v", addr, err)
	}
	l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("FreeAddr %s for UDP: %v", addr, err)
	}
	u.Close()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("FreeAddr = %s, want loopback", addr)
	}
}
