package main

import (
	"fmt"
	"regexp"
	"time"
)

// tool is what loads a target.
type tool int

const (
	// toolWrk: saturated, HTTP/1.1, closed loop.
	toolWrk tool = iota
	// toolH2load: saturated, HTTP/2 over TLS, closed loop.
	toolH2load
	// toolOpen: the open-loop generator at a fixed rate.
	toolOpen
)

// run is one measurement of a round.
type run struct {
	logs  bool   // the proxy writes an access log
	proxy string // "direct", "edge" or "nginx"
	tls   bool
	tool  tool
	// pct is the open loop's rate, in percent of the round's nginx plain
	// saturated req/s (logs off).
	pct int
}

// nginxPlain is the run whose rate the open-loop rates are a share of.
var nginxPlain = run{proxy: "nginx", tool: toolWrk}

// openPercents are the open-loop rates without access logs; with them,
// only the middle one.
var openPercents = []int{25, 50, 75}

// plan is every round's runs, in order: without access logs, then with
// them; saturated runs (wrk plain and TLS, h2load), then the open loop,
// the direct backend first at each rate. The open-loop TLS runs and the
// runs with access logs take the middle rate only, to keep a round short.
func plan() []run {
	var p []run
	for _, logs := range []bool{false, true} {
		for _, secure := range []bool{false, true} {
			for _, px := range []string{"edge", "nginx"} {
				p = append(p, run{logs: logs, proxy: px, tls: secure, tool: toolWrk})
			}
		}
		for _, px := range []string{"edge", "nginx"} {
			p = append(p, run{logs: logs, proxy: px, tls: true, tool: toolH2load})
		}
		for _, pct := range openPercents {
			if logs && pct != 50 {
				continue
			}
			if !logs {
				p = append(p, run{proxy: "direct", tool: toolOpen, pct: pct})
			}
			for _, px := range []string{"edge", "nginx"} {
				p = append(p, run{logs: logs, proxy: px, tool: toolOpen, pct: pct})
			}
			if !logs && pct == 50 {
				for _, px := range []string{"edge", "nginx"} {
					p = append(p, run{proxy: px, tls: true, tool: toolOpen, pct: pct})
				}
			}
		}
	}
	return p
}

// selectRuns keeps the runs whose label matches only (all of them when
// it is empty), and nginx plain's saturated run when a kept open-loop run
// takes its rate from it.
func selectRuns(runs []run, only string) ([]run, error) {
	if only == "" {
		return runs, nil
	}
	re, err := regexp.Compile(only)
	if err != nil {
		return nil, fmt.Errorf("-only %q: %w", only, err)
	}
	needBase := false
	for _, r := range runs {
		needBase = needBase || (r.tool == toolOpen && re.MatchString(r.label()))
	}
	var kept []run
	for _, r := range runs {
		if re.MatchString(r.label()) || (needBase && r == nginxPlain) {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("-only %q matches no run; labels look like %q", only, runs[0].label())
	}
	return kept, nil
}

// key identifies a run within a round.
func (r run) key() string {
	return fmt.Sprintf("%v/%s/%v/%d/%d", r.logs, r.proxy, r.tls, r.tool, r.pct)
}

// target is the proxy and its protocol: "direct", "edge plain", "nginx
// TLS", "edge h2".
func (r run) target() string {
	switch {
	case r.proxy == "direct":
		return "direct"
	case r.tool == toolH2load:
		return r.proxy + " h2"
	case r.tls:
		return r.proxy + " TLS"
	}
	return r.proxy + " plain"
}

func (r run) logsName() string {
	if r.logs {
		return "on"
	}
	return "off"
}

func (r run) toolName() string {
	switch r.tool {
	case toolWrk:
		return "wrk"
	case toolH2load:
		return "h2load"
	}
	return fmt.Sprintf("open %d%%", r.pct)
}

func (r run) label() string {
	return fmt.Sprintf("logs %-3s  %-11s  %-8s", r.logsName(), r.target(), r.toolName())
}

// direct is the direct backend's run at r's rate: the base of r's added
// latency.
func (r run) direct() run { return run{proxy: "direct", tool: toolOpen, pct: r.pct} }

// measure is what one run measured.
type measure struct {
	// RPS is answered requests per second; Rate the open loop's
	// requested rate.
	RPS, Rate float64
	// Latencies: wrk gives P50 and P99; the open loop P50, P99 and P999;
	// h2load only a Mean.
	P50, P99, P999, Mean time.Duration
	// CPU is the proxy's CPU time per request; 0 for the direct backend.
	CPU time.Duration
	// Requests answered; Errors failed; Unfinished: open-loop requests not
	// answered when the run gave up on them.
	Requests, Errors, Unfinished int64
}

// progress is a round's line for one run.
func progress(r run, m measure) string {
	s := r.label() + "  "
	switch r.tool {
	case toolWrk:
		s += fmt.Sprintf("%8.0f req/s  p50 %s  p99 %s", m.RPS, ms(m.P50), ms(m.P99))
	case toolH2load:
		s += fmt.Sprintf("%8.0f req/s  mean %s", m.RPS, ms(m.Mean))
	default:
		s += fmt.Sprintf("%8.0f req/s  p50 %s  p99 %s  p99.9 %s", m.Rate, ms(m.P50), ms(m.P99), ms(m.P999))
	}
	if r.proxy != "direct" {
		s += "  " + us(m.CPU) + "µs CPU/req"
	}
	if m.Errors > 0 || m.Unfinished > 0 {
		s += fmt.Sprintf("  errors %d, unfinished %d", m.Errors, m.Unfinished)
	}
	return s
}
