package afde2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBlockedWindowRestarts: requests served again soon after the
// withdrawal (Front Door's edges still propagating) restart the blocked
// window instead of failing the run; a withdrawal that keeps serving fails
// it, naming the longest window.
func TestBlockedWindowRestarts(t *testing.T) {
	cases := []struct {
		name string
		// serve says whether the i-th request is served.
		serve   func(i int64) bool
		timeout time.Duration
		wantErr string
	}{
		{"blocked at once", func(int64) bool { return false }, 10 * time.Second, ""},
		{"served twice after the first block, then blocked", func(i int64) bool { return i == 0 || i == 3 || i == 7 }, 10 * time.Second, ""},
		{"served every third request", func(i int64) bool { return i%3 == 0 }, 400 * time.Millisecond, "no 60ms in a row unserved within 400ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var i atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tc.serve(i.Add(1) - 1) {
					_, _ = io.WriteString(w, "served")
					return
				}
				http.Error(w, "no Front Door endpoint serves this host", http.StatusNotFound)
			}))
			t.Cleanup(srv.Close)
			var out strings.Builder
			r := &run{Config: Config{Timeout: tc.timeout, BlockedFor: 60 * time.Millisecond, PollEvery: 10 * time.Millisecond, Out: &out}, http: srv.Client()}
			err := r.blocked(context.Background(), srv.URL)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("blocked: %v\n%s", err, out.String())
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("blocked: %v, want an error with %q\n%s", err, tc.wantErr, out.String())
			}
		})
	}
}
