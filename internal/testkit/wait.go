// Package testkit holds what tests and bench harnesses share: waiting for
// a condition (Eventually, Until, Poll), free loopback ports (FreePort,
// FreePorts, PickFreePorts) and child processes (Child, on Unix). It
// imports no fleetnet package, so that every package's tests can use it.
package testkit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Eventually calls check until it returns nil. If timeout passes first it
// fails t with what was awaited and check's last error: "waited 30s for
// the Gateway to be programmed: <error>". check's context ends at the
// timeout, so a call that hangs cannot outlast it. See Poll for how often
// it polls.
func Eventually(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	if err := poll(context.Background(), timeout, check); err != nil {
		t.Fatalf("waited %s for %s: %v", timeout, what, err)
	}
}

// Until calls cond until it returns true. If timeout passes first it fails
// t with what was awaited: "waited 10s for the endpoint to be healthy".
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := poll(context.Background(), timeout, func(context.Context) error {
		if cond() {
			return nil
		}
		return errNotYet
	})
	if err != nil {
		t.Fatalf("waited %s for %s", timeout, what)
	}
}

// Poll is Eventually for a harness without a testing.TB: it calls check
// until it returns nil, and returns nil. If timeout passes first it
// returns check's last error ("after 10s: <error>"); if ctx ends first,
// ctx's error. check's context ends at the timeout.
//
// The first call is at once; the interval between calls starts at 1 ms
// and doubles up to a hundredth of the timeout, within 10 ms to 500 ms:
// a short wait notices at once, a long one (a benchmark listing
// thousands of objects) does not load what it watches.
func Poll(ctx context.Context, timeout time.Duration, check func(ctx context.Context) error) error {
	if err := poll(ctx, timeout, check); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("after %s: %w", timeout, err)
	}
	return nil
}

var errNotYet = errors.New("not yet")

// poll returns nil once check does; check's last error once timeout has
// passed; ctx's error once ctx ends.
func poll(ctx context.Context, timeout time.Duration, check func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	interval, longest := time.Millisecond, min(max(timeout/100, 10*time.Millisecond), 500*time.Millisecond)
	for {
		err := check(cctx)
		if err == nil {
			return nil
		}
		select {
		case <-cctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		case <-time.After(interval):
		}
		interval = min(2*interval, longest)
	}
}
