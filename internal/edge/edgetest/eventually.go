package edgetest

import (
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it returns nil, and fails the
// test with what and cond's last error after 10 seconds.
func Eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
