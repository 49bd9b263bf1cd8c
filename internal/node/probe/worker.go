package probe

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Kind is what a probe decides about a container.
type Kind int

const (
	// Readiness decides whether the container receives traffic.
	Readiness Kind = iota + 1
	// Liveness decides whether the container is restarted.
	Liveness
	// Startup decides whether the container has started; other probes
	// wait for it.
	Startup
)

// String returns the kubelet's name for k.
func (k Kind) String() string {
	switch k {
	case Readiness:
		return "Readiness"
	case Liveness:
		return "Liveness"
	case Startup:
		return "Startup"
	default:
		return "Unknown"
	}
}

// initial is the result a container has before its probe has decided
// anything, as in the kubelet: not ready, alive, and not yet started.
func (k Kind) initial() Result {
	switch k {
	case Readiness:
		return Failure
	case Liveness:
		return Success
	default:
		return Unknown
	}
}

// Worker runs one probe of one container instance on the probe's schedule
// and reports its result, as the kubelet's probe worker does.
//
// The caller gates probes as the kubelet does: readiness and liveness
// Workers start once the startup Worker (if any) reports Success, and a
// restarted container gets new Workers, so initialDelaySeconds counts from
// its start.
type Worker struct {
	// Second is how long one second of the probe's initialDelaySeconds,
	// periodSeconds and timeoutSeconds lasts; zero means time.Second.
	// Tests shorten it. Set it before Run.
	Second time.Duration

	kind      Kind
	probe     *corev1.Probe
	podIP     string
	container *corev1.Container
	target    Target
	report    func(r Result, message string)
}

// NewWorker returns a Worker that runs probe p of the given kind against
// container c of the pod at podIP through t, and calls report from Run's
// goroutine:
//   - once at the start with the kind's initial result (Readiness: Failure,
//     Liveness: Success, Startup: Unknown) and an empty message;
//   - each time the result flips, after successThreshold passing or
//     failureThreshold failing attempts in a row, with the message of the
//     attempt that flipped it (a passing one may carry a warning);
//   - when an attempt cannot be run (see Do), with the result unchanged and
//     the reason, once per run of such attempts. Such attempts count toward
//     neither threshold, as in the kubelet, which records them as events.
//
// The probe's zero fields take the kubelet's defaults (timeoutSeconds 1,
// periodSeconds 10, successThreshold 1, failureThreshold 3); a liveness or
// startup probe's successThreshold is 1 whatever it says, the only value the
// API server accepts.
func NewWorker(kind Kind, p *corev1.Probe, podIP string, c *corev1.Container, t Target, report func(r Result, message string)) *Worker {
	return &Worker{kind: kind, probe: p, podIP: podIP, container: c, target: t, report: report}
}

// Run probes until ctx ends or the probe has nothing left to decide: a
// liveness probe that has failed (the container is to be restarted) or a
// startup probe that has passed or failed. The kubelet stops probing in
// those cases until the container is replaced, and a replaced container gets
// a new Worker.
func (w *Worker) Run(ctx context.Context) {
	second := w.Second
	if second <= 0 {
		second = time.Second
	}
	tm := timingFor(w.kind, w.probe, second)
	tr := newTracker(w.kind.initial(), tm.successThreshold, tm.failureThreshold)
	w.report(tr.current, "")

	if tm.initialDelay > 0 {
		delay := time.NewTimer(tm.initialDelay)
		select {
		case <-ctx.Done():
			delay.Stop()
			return
		case <-delay.C:
		}
	}
	// A ticker, as the kubelet's: attempts start a period apart, however
	// long each took, and a slow attempt skips the ticks it overran.
	tick := time.NewTicker(tm.period)
	defer tick.Stop()
	for {
		r, msg := attempt(ctx, w.probe, tm.timeout, w.podIP, w.container, w.target)
		if ctx.Err() != nil {
			// The attempt was cut short by the caller, not by the
			// container.
			return
		}
		report, settled := tr.observe(r)
		if report {
			w.report(tr.current, msg)
		}
		if settled && (w.kind == Startup || (w.kind == Liveness && tr.current == Failure)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// timing is a probe's schedule and thresholds with the defaults applied.
type timing struct {
	initialDelay, period, timeout      time.Duration
	successThreshold, failureThreshold int
}

// timingFor returns the schedule of probe p of the given kind, counting
// second for each of the probe's seconds.
func timingFor(kind Kind, p *corev1.Probe, second time.Duration) timing {
	var q corev1.Probe
	if p != nil {
		q = *p
	}
	orDefault := func(v, def int32) int32 {
		if v <= 0 {
			return def
		}
		return v
	}
	tm := timing{
		initialDelay:     time.Duration(max(q.InitialDelaySeconds, 0)) * second,
		period:           time.Duration(orDefault(q.PeriodSeconds, defaultPeriodSeconds)) * second,
		timeout:          time.Duration(orDefault(q.TimeoutSeconds, defaultTimeoutSeconds)) * second,
		successThreshold: int(orDefault(q.SuccessThreshold, defaultSuccessThreshold)),
		failureThreshold: int(orDefault(q.FailureThreshold, defaultFailureThreshold)),
	}
	if kind != Readiness {
		tm.successThreshold = 1
	}
	return tm
}

// tracker turns a sequence of attempt results into the container's result
// with the kubelet's thresholds. It does no IO and keeps no time.
type tracker struct {
	successThreshold, failureThreshold int

	current  Result // the result last decided
	last     Result // the last attempt that ran
	run      int    // how many attempts in a row gave last
	erroring bool   // the last attempt could not be run
}

func newTracker(initial Result, successThreshold, failureThreshold int) *tracker {
	return &tracker{successThreshold: successThreshold, failureThreshold: failureThreshold, current: initial}
}

// observe folds in one attempt's result. report says the caller should
// report: the result flipped, or this attempt is the first of a run that
// could not be run (Unknown). settled says this attempt reached a
// threshold, whether or not it changed the result.
func (t *tracker) observe(r Result) (report, settled bool) {
	if r != Success && r != Failure {
		first := !t.erroring
		t.erroring = true
		return first, false
	}
	t.erroring = false
	if r == t.last {
		t.run++
	} else {
		t.last, t.run = r, 1
	}
	threshold := t.successThreshold
	if r == Failure {
		threshold = t.failureThreshold
	}
	if t.run < threshold {
		return false, false
	}
	changed := t.current != r
	t.current = r
	return changed, true
}
