package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// cannotRun in a script makes Exec fail instead of exiting.
const cannotRun = -1

// script is a Target whose command exits with the scripted codes in turn.
// Past the end of the script, Exec closes drained and waits for the Worker
// to be stopped, so a test sees every attempt the script allows and no
// more.
type script struct {
	codes   []int
	drained chan struct{}

	mu    sync.Mutex
	calls []time.Time
}

var _ Target = (*script)(nil)

func newScript(codes ...int) *script {
	return &script{codes: codes, drained: make(chan struct{})}
}

func (s *script) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("a script only runs commands")
}

func (s *script) Exec(ctx context.Context, _ []string) (int, []byte, error) {
	s.mu.Lock()
	i := len(s.calls)
	s.calls = append(s.calls, time.Now())
	s.mu.Unlock()
	switch {
	case i == len(s.codes):
		close(s.drained)
		fallthrough
	case i > len(s.codes):
		<-ctx.Done()
		return cannotRun, nil, ctx.Err()
	case s.codes[i] == cannotRun:
		return cannotRun, nil, errors.New("boom")
	default:
		return s.codes[i], []byte(fmt.Sprintf("exit %d", s.codes[i])), nil
	}
}

func (s *script) callTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.calls...)
}

type report struct {
	Result  Result
	Message string
}

// scriptProbe is an exec probe with the given thresholds that attempts
// every period and never times out in a test.
func scriptProbe(success, failure int32) *corev1.Probe {
	p := execProbeOf("check")
	p.PeriodSeconds = 1
	p.TimeoutSeconds = 1_000_000
	p.SuccessThreshold = success
	p.FailureThreshold = failure
	return p
}

// startWorker runs w until the test ends and returns what it reported, to be
// read once done is closed.
func startWorker(t *testing.T, kind Kind, p *corev1.Probe, s *script) (w *Worker, cancel context.CancelFunc, done <-chan struct{}, got *[]report) {
	t.Helper()
	got = new([]report)
	w = NewWorker(kind, p, "127.0.0.1", &corev1.Container{Name: "app"}, s, func(r Result, msg string) {
		*got = append(*got, report{r, msg})
	})
	w.Second = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-ch
	})
	go func() {
		defer close(ch)
		w.Run(ctx)
	}()
	return w, cancel, ch, got
}

func TestWorker(t *testing.T) {
	const failed = `running "check": boom`
	tests := []struct {
		name  string
		kind  Kind
		probe *corev1.Probe
		codes []int
		want  []report
		// stops: Run returns by itself after the script; otherwise it
		// would probe on until canceled.
		stops bool
	}{
		{
			name: "readiness needs successThreshold passes and failureThreshold failures in a row",
			kind: Readiness, probe: scriptProbe(2, 2),
			codes: []int{0, 1, 0, 0, 1, 0, 1, 1},
			want:  []report{{Failure, ""}, {Success, ""}, {Failure, "exit 1"}},
		},
		{
			name: "readiness with the default thresholds (1 and 3)",
			kind: Readiness, probe: scriptProbe(0, 0),
			codes: []int{1, 0, 1, 1, 0, 1, 1, 1},
			want:  []report{{Failure, ""}, {Success, ""}, {Failure, "exit 1"}},
		},
		{
			name: "readiness reports nothing more while the result holds",
			kind: Readiness, probe: scriptProbe(1, 1),
			codes: []int{0, 0, 0},
			want:  []report{{Failure, ""}, {Success, ""}},
		},
		{
			name: "liveness is alive until failureThreshold failures, then stops",
			kind: Liveness, probe: scriptProbe(0, 0),
			codes: []int{1, 1, 0, 1, 1, 1},
			want:  []report{{Success, ""}, {Failure, "exit 1"}},
			stops: true,
		},
		{
			name: "startup passes at once whatever successThreshold says, then stops",
			kind: Startup, probe: scriptProbe(3, 0),
			codes: []int{1, 1, 0},
			want:  []report{{Unknown, ""}, {Success, ""}},
			stops: true,
		},
		{
			name: "startup fails after failureThreshold failures, then stops",
			kind: Startup, probe: scriptProbe(0, 2),
			codes: []int{1, 1},
			want:  []report{{Unknown, ""}, {Failure, "exit 1"}},
			stops: true,
		},
		{
			name: "attempts that cannot run count toward neither threshold, reported once per run",
			kind: Readiness, probe: scriptProbe(0, 2),
			codes: []int{0, cannotRun, 1, cannotRun, cannotRun, 1, 0},
			want: []report{{Failure, ""}, {Success, ""}, {Success, failed}, {Success, failed},
				{Failure, "exit 1"}, {Success, ""}},
		},
		{
			name: "liveness attempts that cannot run never restart the container",
			kind: Liveness, probe: scriptProbe(0, 1),
			codes: []int{cannotRun, cannotRun, cannotRun},
			want:  []report{{Success, ""}, {Success, failed}},
		},
		{
			name: "an attempt cut short by the caller is no result",
			kind: Readiness, probe: scriptProbe(0, 0),
			codes: nil,
			want:  []report{{Failure, ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScript(tt.codes...)
			_, cancel, done, got := startWorker(t, tt.kind, tt.probe, s)
			guard := time.After(30 * time.Second)
			wantCalls := len(tt.codes)
			if tt.stops {
				select {
				case <-done:
				case <-s.drained:
					t.Fatal("the worker probed past the point where it should have stopped")
				case <-guard:
					t.Fatal("the worker did not stop")
				}
			} else {
				select {
				case <-s.drained:
				case <-done:
					t.Fatal("Run returned before it was canceled")
				case <-guard:
					t.Fatal("the worker did not run the script")
				}
				cancel()
				<-done
				wantCalls++
			}
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("reports (-want +got):\n%s", diff)
			}
			if n := len(s.callTimes()); n != wantCalls {
				t.Errorf("%d attempts, want %d", n, wantCalls)
			}
		})
	}
}

func TestWorkerSchedule(t *testing.T) {
	p := scriptProbe(1, 1)
	p.InitialDelaySeconds = 30
	p.PeriodSeconds = 10
	s := newScript(0, 0, 0)
	start := time.Now()
	_, cancel, done, _ := startWorker(t, Readiness, p, s)
	select {
	case <-s.drained:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not run the script")
	}
	cancel()
	<-done
	// Timers never fire early, so these lower bounds hold on any machine:
	// the first attempt after the initial delay, each next a period later.
	for i, at := range s.callTimes() {
		min := 30*time.Millisecond + time.Duration(i)*10*time.Millisecond
		if d := at.Sub(start); d < min {
			t.Errorf("attempt %d after %v, want at least %v", i, d, min)
		}
	}
}

func TestWorkerCanceledDuringInitialDelay(t *testing.T) {
	p := scriptProbe(1, 1)
	p.InitialDelaySeconds = 1_000_000
	s := newScript(0)
	_, cancel, done, got := startWorker(t, Liveness, p, s)
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if diff := cmp.Diff([]report{{Success, ""}}, *got); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	if n := len(s.callTimes()); n != 0 {
		t.Errorf("%d attempts during the initial delay", n)
	}
}

// TestTracker drives the threshold logic by letters: S success, F failure,
// U an attempt that could not run. current is the result after each
// attempt, report and settled mark with x the attempts that report and
// that reach a threshold.
func TestTracker(t *testing.T) {
	tests := []struct {
		name             string
		initial          Result
		success, failure int
		in               string
		current          string
		report           string
		settled          string
	}{
		{"readiness 1/3", Failure, 1, 3,
			"SFFSFFF", "SSSSSSF", "x.....x", "x..x..x"},
		{"readiness 3/1", Failure, 3, 1,
			"SSFSSS", "FFFFFS", ".....x", "..x..x"},
		{"liveness 1/3", Success, 1, 3,
			"FFSFFF", "SSSSSF", ".....x", "..x..x"},
		{"startup 1/2 passes", Unknown, 1, 2,
			"FS", "US", ".x", ".x"},
		{"startup 1/2 fails", Unknown, 1, 2,
			"FF", "UF", ".x", ".x"},
		{"U keeps the runs and reports once per run of Us", Failure, 2, 2,
			"SUUSUF", "FFFSSS", ".x.xx.", "...x.."},
		{"U first", Unknown, 1, 1,
			"UUS", "UUS", "x.x", "..x"},
	}
	letter := map[byte]Result{'S': Success, 'F': Failure, 'U': Unknown}
	mark := func(b bool) byte {
		if b {
			return 'x'
		}
		return '.'
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(tt.initial, tt.success, tt.failure)
			var current, report, settled []byte
			for i := range len(tt.in) {
				rep, set := tr.observe(letter[tt.in[i]])
				current = append(current, tr.current.String()[0])
				report = append(report, mark(rep))
				settled = append(settled, mark(set))
			}
			if string(current) != tt.current || string(report) != tt.report || string(settled) != tt.settled {
				t.Errorf("in %s: current %s report %s settled %s; want %s %s %s",
					tt.in, current, report, settled, tt.current, tt.report, tt.settled)
			}
		})
	}
}

func TestTimingFor(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		kind   Kind
		probe  *corev1.Probe
		second time.Duration
		want   timing
	}{
		{"kubelet defaults", Readiness, &corev1.Probe{}, time.Second,
			timing{0, 10 * time.Second, time.Second, 1, 3}},
		{"nil probe takes the defaults", Liveness, nil, time.Second,
			timing{0, 10 * time.Second, time.Second, 1, 3}},
		{"set fields, scaled", Readiness, &corev1.Probe{InitialDelaySeconds: 5, PeriodSeconds: 2, TimeoutSeconds: 3, SuccessThreshold: 4, FailureThreshold: 6}, ms,
			timing{5 * ms, 2 * ms, 3 * ms, 4, 6}},
		{"liveness successThreshold is 1", Liveness, &corev1.Probe{SuccessThreshold: 4}, time.Second,
			timing{0, 10 * time.Second, time.Second, 1, 3}},
		{"startup successThreshold is 1", Startup, &corev1.Probe{SuccessThreshold: 4, FailureThreshold: 30}, time.Second,
			timing{0, 10 * time.Second, time.Second, 1, 30}},
		{"negative values are treated as unset", Readiness, &corev1.Probe{InitialDelaySeconds: -1, PeriodSeconds: -1}, time.Second,
			timing{0, 10 * time.Second, time.Second, 1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, timingFor(tt.kind, tt.probe, tt.second), cmp.AllowUnexported(timing{})); diff != "" {
				t.Errorf("timing (-want +got):\n%s", diff)
			}
		})
	}
}
