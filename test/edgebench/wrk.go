package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
)

// result is what one wrk run measured.
type result struct {
	RPS      float64
	P50, P99 time.Duration
	Requests int64
	// Errors are non-2xx/3xx responses plus socket errors.
	Errors int64
}

// load is how wrk is run.
type load struct {
	Threads, Connections int
	Duration             time.Duration
}

func wrkPath() (string, error) {
	bin, err := exec.LookPath("wrk")
	if err != nil {
		return "", errors.New("wrk is not installed: apt-get install wrk")
	}
	return bin, nil
}

// runWrk runs wrk against url and parses its report.
func runWrk(ctx context.Context, bin, url string, l load) (result, error) {
	secs := max(1, int(l.Duration.Round(time.Second)/time.Second))
	cmd := exec.CommandContext(ctx, bin, "-t"+strconv.Itoa(l.Threads), "-c"+strconv.Itoa(l.Connections),
		"-d"+strconv.Itoa(secs)+"s", "--latency", url)
	cmd.SysProcAttr = testkit.ChildAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("wrk %s: %w: %s", url, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return result{}, fmt.Errorf("wrk %s: %w:\n%s", url, err, out)
	}
	return r, nil
}

// parseWrk reads requests per second, the 50% and 99% latencies, the
// request count and the errors from wrk's --latency report.
func parseWrk(out string) (result, error) {
	var r result
	var haveRPS, have50, have99 bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, fmt.Errorf("requests/sec %q: %w", f[1], err)
			}
			r.RPS, haveRPS = v, true
		case len(f) == 2 && (f[0] == "50%" || f[0] == "99%"):
			d, err := parseWrkDuration(f[1])
			if err != nil {
				return r, err
			}
			if f[0] == "50%" {
				r.P50, have50 = d, true
			} else {
				r.P99, have99 = d, true
			}
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			r.Requests, _ = strconv.ParseInt(f[0], 10, 64)
		case len(f) == 5 && f[0] == "Non-2xx":
			n, _ := strconv.ParseInt(f[4], 10, 64)
			r.Errors += n
		case len(f) > 2 && f[0] == "Socket" && f[1] == "errors:":
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 3; i < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i], ","), 10, 64)
				r.Errors += n
			}
		}
	}
	if !haveRPS || !have50 || !have99 {
		return r, errors.New("no Requests/sec, 50% or 99% line in wrk's output")
	}
	return r, nil
}

// parseWrkDuration reads wrk's latencies: 812.00us, 1.23ms, 2.01s, 1.50m.
func parseWrkDuration(s string) (time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"m", time.Minute}, {"s", time.Second}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("latency %q: %w", s, err)
			}
			return time.Duration(math.Round(v * float64(u.unit))), nil
		}
	}
	return 0, fmt.Errorf("latency %q: unknown unit", s)
}
