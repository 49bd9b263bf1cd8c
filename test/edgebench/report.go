package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// median is the middle of xs, or the mean of the middle two; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// overRounds is the median over the rounds of f, which reads a round's
// measurements.
func overRounds(rounds []map[string]measure, f func(round map[string]measure) float64) float64 {
	xs := make([]float64, 0, len(rounds))
	for _, round := range rounds {
		xs = append(xs, f(round))
	}
	return median(xs)
}

// field is the median over the rounds of one field of r's measure.
func field(rounds []map[string]measure, r run, f func(measure) float64) float64 {
	return overRounds(rounds, func(round map[string]measure) float64 { return f(round[r.key()]) })
}

// added is the median over the rounds of what r adds to the direct
// backend's latency f at the same rate in the same round.
func added(rounds []map[string]measure, r run, f func(measure) time.Duration) time.Duration {
	return time.Duration(overRounds(rounds, func(round map[string]measure) float64 {
		return float64(f(round[r.key()]) - f(round[r.direct().key()]))
	}))
}

func sum(rounds []map[string]measure, r run, f func(measure) int64) int64 {
	var n int64
	for _, round := range rounds {
		n += f(round[r.key()])
	}
	return n
}

func dur(f func(measure) time.Duration) func(measure) float64 {
	return func(m measure) float64 { return float64(f(m)) }
}

var (
	rps  = func(m measure) float64 { return m.RPS }
	rate = func(m measure) float64 { return m.Rate }
	p50  = func(m measure) time.Duration { return m.P50 }
	p99  = func(m measure) time.Duration { return m.P99 }
	p999 = func(m measure) time.Duration { return m.P999 }
	mean = func(m measure) time.Duration { return m.Mean }
	cpu  = func(m measure) time.Duration { return m.CPU }
	errs = func(m measure) int64 { return m.Errors }
	left = func(m measure) int64 { return m.Unfinished }
)

// summary compares the edge with nginx, with or without access logs.
type summary struct {
	// Throughput is edge/nginx of the median saturated req/s; CPU
	// edge/nginx of the median CPU per request.
	Throughput, CPU struct{ Plain, TLS, H2 float64 }
	// AddedP99 is each proxy's added p99 at 50 %, open loop, plain.
	AddedP99 struct{ Edge, Nginx time.Duration }
}

func summarize(rounds []map[string]measure, logs bool) summary {
	var s summary
	ratio := func(secure bool, t tool, f func(measure) float64) float64 {
		e := field(rounds, run{logs: logs, proxy: "edge", tls: secure, tool: t}, f)
		n := field(rounds, run{logs: logs, proxy: "nginx", tls: secure, tool: t}, f)
		if n == 0 {
			return 0
		}
		return e / n
	}
	s.Throughput.Plain, s.Throughput.TLS, s.Throughput.H2 = ratio(false, toolWrk, rps), ratio(true, toolWrk, rps), ratio(true, toolH2load, rps)
	c := dur(cpu)
	s.CPU.Plain, s.CPU.TLS, s.CPU.H2 = ratio(false, toolWrk, c), ratio(true, toolWrk, c), ratio(true, toolH2load, c)
	s.AddedP99.Edge = added(rounds, run{logs: logs, proxy: "edge", tool: toolOpen, pct: 50}, p99)
	s.AddedP99.Nginx = added(rounds, run{logs: logs, proxy: "nginx", tool: toolOpen, pct: 50}, p99)
	return s
}

// finalLine is the report's last line, read by scripts and the issue:
// access logs off.
func finalLine(s summary) string {
	return fmt.Sprintf("edge/nginx: plain=%.2f tls=%.2f h2=%.2f added-p99-at-50%%=%sms",
		s.Throughput.Plain, s.Throughput.TLS, s.Throughput.H2, strconv.FormatFloat(float64(s.AddedP99.Edge)/float64(time.Millisecond), 'f', 2, 64))
}

// report prints the medians of the rounds: the saturated runs, the open
// loop, the comparison with and without access logs, and the final line.
func report(out io.Writer, runs []run, rounds []map[string]measure) {
	fmt.Fprintf(out, "\nsaturated, medians of %d rounds (CPU: the proxy's CPU time per request; errors: all rounds)\n", len(rounds))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "logs\ttarget\ttool\treq/s\tp50\tp99\tmean\tCPU µs/req\terrors\t")
	for _, r := range runs {
		if r.tool == toolOpen {
			continue
		}
		l50, l99, lmean := "-", "-", "-"
		if r.tool == toolWrk {
			l50, l99 = ms(time.Duration(field(rounds, r, dur(p50)))), ms(time.Duration(field(rounds, r, dur(p99))))
		} else {
			lmean = ms(time.Duration(field(rounds, r, dur(mean))))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%d\t\n", r.logsName(), r.target(), r.toolName(), field(rounds, r, rps),
			l50, l99, lmean, us(time.Duration(field(rounds, r, dur(cpu)))), sum(rounds, r, errs))
	}
	_ = w.Flush()

	fmt.Fprintf(out, "\nopen loop, medians of %d rounds: rate in %% of the round's nginx plain saturated req/s (logs off); "+
		"+p: minus the direct backend's at the same rate in the same round; errors and unfinished: all rounds\n", len(rounds))
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "logs\ttarget\trate\treq/s\tp50\tp99\tp99.9\t+p50\t+p99\t+p99.9\tCPU µs/req\terrors\tunfinished\t")
	for _, r := range runs {
		if r.tool != toolOpen {
			continue
		}
		a50, a99, a999, c := "-", "-", "-", "-"
		if r.proxy != "direct" {
			a50, a99, a999 = ms(added(rounds, r, p50)), ms(added(rounds, r, p99)), ms(added(rounds, r, p999))
			c = us(time.Duration(field(rounds, r, dur(cpu))))
		}
		fmt.Fprintf(w, "%s\t%s\t%d%%\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n", r.logsName(), r.target(), r.pct, field(rounds, r, rate),
			ms(time.Duration(field(rounds, r, dur(p50)))), ms(time.Duration(field(rounds, r, dur(p99)))), ms(time.Duration(field(rounds, r, dur(p999)))),
			a50, a99, a999, c, sum(rounds, r, errs), sum(rounds, r, left))
	}
	_ = w.Flush()

	fmt.Fprintln(out)
	off := summarize(rounds, false)
	for _, logs := range []bool{false, true} {
		s := summarize(rounds, logs)
		name := run{logs: logs}.logsName()
		fmt.Fprintf(out, "access logs %-3s edge/nginx req/s plain %.2f, TLS %.2f, h2 %.2f; CPU per request plain %.2f, TLS %.2f, h2 %.2f; added p99 at 50 %% edge %s, nginx %s\n",
			name, s.Throughput.Plain, s.Throughput.TLS, s.Throughput.H2, s.CPU.Plain, s.CPU.TLS, s.CPU.H2, ms(s.AddedP99.Edge), ms(s.AddedP99.Nginx))
	}
	fmt.Fprintln(out, finalLine(off))
}

// us is a duration in microseconds, one decimal.
func us(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 1, 64)
}
