package fleet

import (
	"context"
	"testing"
	"time"
)

// Eventually polls check until it returns nil and fails the test with the
// last error when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	interval := 20 * time.Millisecond
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("condition not met within %s: %v", timeout, err)
		case <-time.After(interval):
		}
		interval = min(2*interval, 500*time.Millisecond)
	}
}
