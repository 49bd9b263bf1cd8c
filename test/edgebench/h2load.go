package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
)

// h2Result is what one h2load run measured.
type h2Result struct {
	RPS float64
	// Requests succeeded (2xx or 3xx); Errors are the others done (the
	// streams still open when the run ends are neither).
	Requests, Errors int64
	// Mean is the mean time for a request (h2load gives no percentiles).
	Mean time.Duration
	// What the connections negotiated.
	TLSVersion, Cipher, Protocol string
}

// h2Load is how h2load is run: Connections over Threads, each with up to
// Streams concurrent streams.
type h2Load struct {
	Threads, Connections, Streams int
	Duration                      time.Duration
}

func h2loadPath() (string, error) {
	bin, err := exec.LookPath("h2load")
	if err != nil {
		return "", errors.New("h2load is not installed: apt-get install nghttp2-client")
	}
	return bin, nil
}

// runH2load runs h2load against an https url and parses its report; it
// fails unless the connections negotiated h2 over TLS 1.3 with
// benchCipher.
func runH2load(ctx context.Context, bin, url string, l h2Load) (h2Result, error) {
	secs := max(1, int(l.Duration.Round(time.Second)/time.Second))
	cmd := exec.CommandContext(ctx, bin, "-t", strconv.Itoa(l.Threads), "-c", strconv.Itoa(l.Connections),
		"-m", strconv.Itoa(l.Streams), "-D", strconv.Itoa(secs), url)
	cmd.SysProcAttr = testkit.ChildAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return h2Result{}, fmt.Errorf("h2load %s: %w: %s", url, err, out)
	}
	r, err := parseH2load(string(out))
	if err != nil {
		return h2Result{}, fmt.Errorf("h2load %s: %w:\n%s", url, err, out)
	}
	if want := tls.CipherSuiteName(benchCipher); r.Protocol != "h2" || r.TLSVersion != "TLSv1.3" || r.Cipher != want {
		return r, fmt.Errorf("h2load %s negotiated %s over %s with %s, want h2 over TLSv1.3 with %s", url, r.Protocol, r.TLSVersion, r.Cipher, want)
	}
	return r, nil
}

// parseH2load reads h2load's report:
//
//	TLS Protocol: TLSv1.3
//	Cipher: TLS_AES_128_GCM_SHA256
//	Application protocol: h2
//	finished in 5.00s, 41046.20 req/s, 6.34MB/s
//	requests: 205231 total, 205231 started, 205231 done, 205231 succeeded, 0 failed, 0 errored, 0 timeout
//	time for request:   122us  29.47ms  1.53ms  1.06ms  80.63%
func parseH2load(out string) (h2Result, error) {
	var r h2Result
	var haveRPS, haveRequests bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "TLS Protocol:"):
			r.TLSVersion = strings.TrimSpace(strings.TrimPrefix(line, "TLS Protocol:"))
		case strings.HasPrefix(line, "Cipher:"):
			r.Cipher = strings.TrimSpace(strings.TrimPrefix(line, "Cipher:"))
		case strings.HasPrefix(line, "Application protocol:"):
			r.Protocol = strings.TrimSpace(strings.TrimPrefix(line, "Application protocol:"))
		case len(f) >= 5 && f[0] == "finished" && f[4] == "req/s,":
			v, err := strconv.ParseFloat(f[3], 64)
			if err != nil {
				return r, fmt.Errorf("req/s %q: %w", f[3], err)
			}
			r.RPS, haveRPS = v, true
		case len(f) > 0 && f[0] == "requests:":
			// requests: N total, N started, N done, N succeeded, N failed, ...
			counts := map[string]int64{}
			for i := 1; i+1 < len(f); i += 2 {
				n, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil {
					return r, fmt.Errorf("requests %q: %w", f[i], err)
				}
				counts[strings.TrimSuffix(f[i+1], ",")] = n
			}
			r.Requests, r.Errors, haveRequests = counts["succeeded"], counts["done"]-counts["succeeded"], true
		case strings.HasPrefix(line, "time for request:") && len(f) >= 6:
			d, err := parseWrkDuration(f[5])
			if err != nil {
				return r, err
			}
			r.Mean = d
		}
	}
	if !haveRPS || !haveRequests {
		return r, errors.New("no finished or requests line in h2load's output")
	}
	return r, nil
}
