package containerlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
)

// fixture has a stdout line in two pieces with a stderr line between them,
// and ends with a stderr line whose stream closed without a newline.
var fixture = lines(
	ts(0)+" stdout F one",
	ts(1)+" stderr F two",
	ts(2)+" stdout P thr",
	ts(3)+" stderr F four",
	ts(4)+" stdout F ee",
	ts(5)+" stdout F five",
	ts(6)+" stderr P six",
)

// fixtureAll is fixture read whole: lines come in the order they end.
const fixtureAll = "one\ntwo\nfour\nthree\nfive\nsix"

func TestRead(t *testing.T) {
	alwaysRunning := func() bool { return true }
	tests := []struct {
		name    string
		log     string // fixture when empty
		opts    Options
		running func() bool
		want    string
	}{
		{name: "all", want: fixtureAll},
		{name: "tail 0 is all", opts: Options{Tail: 0}, want: fixtureAll},
		{name: "negative tail is all", opts: Options{Tail: -1}, want: fixtureAll},
		{name: "tail 1 is the unterminated line", opts: Options{Tail: 1}, want: "six"},
		{name: "tail 2", opts: Options{Tail: 2}, want: "five\nsix"},
		{name: "tail 3 reaches back to the first piece", opts: Options{Tail: 3}, want: "three\nfive\nsix"},
		{name: "tail 4", opts: Options{Tail: 4}, want: "four\nthree\nfive\nsix"},
		{name: "tail 5", opts: Options{Tail: 5}, want: "two\nfour\nthree\nfive\nsix"},
		{name: "tail of all lines", opts: Options{Tail: 6}, want: fixtureAll},
		{name: "tail of more than all lines", opts: Options{Tail: 100}, want: fixtureAll},
		{name: "since time keeps its own second", opts: Options{SinceTime: t0.Add(3 * time.Second)}, want: "four\nfive\nsix"},
		{name: "since time goes by a line's first piece", opts: Options{SinceTime: t0.Add(2 * time.Second)}, want: "four\nthree\nfive\nsix"},
		{name: "since seconds", opts: Options{SinceSeconds: 2}, want: "five\nsix"},
		{name: "later since time wins", opts: Options{SinceSeconds: 4, SinceTime: t0.Add(5 * time.Second)}, want: "five\nsix"},
		{name: "later since seconds win", opts: Options{SinceSeconds: 2, SinceTime: t0}, want: "five\nsix"},
		{name: "tail then since", opts: Options{Tail: 3, SinceTime: t0.Add(5 * time.Second)}, want: "five\nsix"},
		{
			name: "timestamps", opts: Options{Timestamps: true},
			want: ts(0) + " one\n" + ts(1) + " two\n" + ts(3) + " four\n" + ts(2) + " three\n" + ts(5) + " five\n" + ts(6) + " six",
		},
		{name: "timestamps with tail", opts: Options{Timestamps: true, Tail: 2}, want: ts(5) + " five\n" + ts(6) + " six"},
		{name: "limit bytes cuts a line", opts: Options{LimitBytes: 6}, want: "one\ntw"},
		{name: "limit bytes at a line end", opts: Options{LimitBytes: 4}, want: "one\n"},
		{name: "limit bytes above the size", opts: Options{LimitBytes: 1000}, want: fixtureAll},
		{name: "limit bytes count timestamps", opts: Options{LimitBytes: 12, Timestamps: true}, want: ts(0)[:12]},
		{name: "limit bytes after tail", opts: Options{Tail: 2, LimitBytes: 7}, want: "five\nsi"},
		{name: "follow without running reads once", opts: Options{Follow: true}, want: fixtureAll},
		{name: "follow of a previous run reads once", opts: Options{Follow: true, Previous: true}, running: alwaysRunning, want: fixtureAll},
		{name: "follow stops at the byte limit", opts: Options{Follow: true, LimitBytes: 6}, running: alwaysRunning, want: "one\ntw"},
		{name: "empty file", log: "\x00", want: ""},
		{
			name: "lines that are not records are skipped, an unfinished record too",
			log: lines("garbage", ts(0)+" stdout F a", "", ts(1)+" stdin F b", ts(2)+" stdout F c") +
				ts(3) + " stdout F torn",
			want: "a\nc\n",
		},
		{
			name: "tail over lines that are not records",
			log:  lines(ts(0)+" stdout F a", "garbage", ts(2)+" stdout F c", "garbage") + ts(3) + " stdout F torn",
			opts: Options{Tail: 1},
			want: "c\n",
		},
		{
			name: "pieces joined under one timestamp",
			log:  lines(ts(0)+" stdout P abcd", ts(1)+" stdout P efgh", ts(2)+" stdout F ij"),
			opts: Options{Timestamps: true},
			want: ts(0) + " abcdefghij\n",
		},
		{
			name: "other writers' timestamps",
			log:  lines("2016-10-06T00:17:09.6697942Z stdout F a"),
			opts: Options{Timestamps: true},
			want: "2016-10-06T00:17:09.669794200Z a\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := tt.log
			switch log {
			case "":
				log = fixture
			case "\x00":
				log = ""
			}
			path := writeFile(t, log)
			r := Reader{
				Now:          func() time.Time { return t0.Add(6 * time.Second) },
				PollInterval: time.Millisecond,
			}
			var out strings.Builder
			if err := r.Read(t.Context(), path, tt.opts, &out, tt.running); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("Read = %q, want %q", out.String(), tt.want)
			}
		})
	}
}

func TestReadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app", "3.log")
	err := Read(t.Context(), path, Options{}, &strings.Builder{}, nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Read of a missing file: %v, want os.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
}

// TestRoundTrip writes through a Writer and reads back through Read.
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		maxLine int
		steps   []step
		opts    Options
		want    string
	}{
		{
			name: "lines of both streams",
			steps: []step{
				{stream: Stdout, data: "hello\n"},
				{stream: Stderr, data: "oops\n"},
				{stream: Stdout, data: "bye\n"},
			},
			want: "hello\noops\nbye\n",
		},
		{
			name:  "empty lines",
			steps: []step{{stream: Stdout, data: "\n\nx\n"}},
			want:  "\n\nx\n",
		},
		{
			name:    "long line split and joined",
			maxLine: 4,
			steps:   []step{{stream: Stdout, data: "abcdefghij\nk\n"}},
			want:    "abcdefghij\nk\n",
		},
		{
			name:    "long line joined under the time of its first piece",
			maxLine: 4,
			steps:   []step{{stream: Stdout, data: "abcdef"}, {stream: Stdout, data: "gh\n"}},
			opts:    Options{Timestamps: true},
			want:    ts(0) + " abcdefgh\n",
		},
		{
			name:    "long line while the other stream writes",
			maxLine: 4,
			steps: []step{
				{stream: Stdout, data: "abcdef"},
				{stream: Stderr, data: "err\n"},
				{stream: Stdout, data: "gh\n"},
			},
			want: "err\nabcdefgh\n",
		},
		{
			name:  "unterminated last line",
			steps: []step{{stream: Stdout, data: "a\nb"}, {stream: Stdout, close: true}},
			want:  "a\nb",
		},
		{
			name:    "unterminated long last line",
			maxLine: 4,
			steps:   []step{{stream: Stdout, data: "abcdefghij"}, {stream: Stdout, close: true}},
			opts:    Options{Tail: 1},
			want:    "abcdefghij",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeLog(t, tt.maxLine, tt.steps)
			var out strings.Builder
			if err := Read(t.Context(), path, tt.opts, &out, nil); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("Read = %q, want %q", out.String(), tt.want)
			}
		})
	}
}

// TestFollow reads a running container's log: what is appended shows, a
// record half written waits for its newline, and reading ends once the
// container stops and the rest is read.
func TestFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	w.Now = newTicker().now
	stdout, stderr := w.Stream(Stdout), w.Stream(Stderr)
	write := func(s interface{ Write([]byte) (int, error) }, data string) {
		t.Helper()
		if _, err := s.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	write(stdout, "before\n")

	var running atomic.Bool
	running.Store(true)
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	r := Reader{PollInterval: time.Millisecond}
	go func() {
		done <- r.Read(t.Context(), path, Options{Follow: true, Timestamps: true}, out, running.Load)
	}()
	want := ts(0) + " before\n"
	waitFor(t, "the existing line", func() bool { return out.String() == want }, func() string { return quote(out.String()) })

	write(stdout, "after\n")
	write(stderr, "err part")
	write(stderr, "ial\n")
	want += ts(1) + " after\n" + ts(2) + " err partial\n"
	waitFor(t, "appended lines", func() bool { return out.String() == want }, func() string { return quote(out.String()) })

	write(stdout, "last without newline")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	running.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still following after the container stopped")
	}
	want += ts(3) + " last without newline"
	if out.String() != want {
		t.Errorf("Read = %q, want %q", out.String(), want)
	}
}

// TestFollowWaitsForWholeRecord appends a record in two writes, as a reader
// can see a write in progress.
func TestFollowWaitsForWholeRecord(t *testing.T) {
	first := ts(0) + " stdout F a\n"
	second := ts(1) + " stdout F second line\n"
	cut := len(second) / 2
	path := writeFile(t, first+second[:cut])

	var running atomic.Bool
	running.Store(true)
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	r := Reader{PollInterval: time.Millisecond}
	go func() { done <- r.Read(t.Context(), path, Options{Follow: true}, out, running.Load) }()
	// The half record was in the file before Read started, so by the time
	// "a" shows Read has seen it and held it back.
	waitFor(t, "the first line", func() bool { return out.String() != "" }, func() string { return quote(out.String()) })
	if got := out.String(); got != "a\n" {
		t.Fatalf("Read = %q before the record was complete, want %q", got, "a\n")
	}

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteString(second[cut:]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the completed record", func() bool { return out.String() != "a\n" }, func() string { return quote(out.String()) })
	running.Store(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "a\nsecond line\n"; got != want {
		t.Errorf("Read = %q, want %q", got, want)
	}
}

func TestFollowEndsWithContext(t *testing.T) {
	path := writeFile(t, lines(ts(0)+" stdout F a"))
	ctx, cancel := context.WithCancel(t.Context())
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	r := Reader{PollInterval: time.Millisecond}
	go func() { done <- r.Read(ctx, path, Options{Follow: true}, out, func() bool { return true }) }()
	waitFor(t, "the line", func() bool { return out.String() == "a\n" }, func() string { return quote(out.String()) })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Read = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still following after its context ended")
	}
}

// TestReadLineOverJoinLimit reads a line longer than a reader joins at once:
// it comes out whole, under one timestamp.
func TestReadLineOverJoinLimit(t *testing.T) {
	piece := strings.Repeat("x", DefaultMaxLine)
	var log strings.Builder
	n := maxJoin/DefaultMaxLine + 3
	for range n {
		log.WriteString(ts(0) + " stdout P " + piece + "\n")
	}
	log.WriteString(ts(1) + " stdout F end\n")
	path := writeFile(t, log.String())
	var out strings.Builder
	if err := Read(t.Context(), path, Options{Timestamps: true}, &out, nil); err != nil {
		t.Fatal(err)
	}
	want := ts(0) + " " + strings.Repeat(piece, n) + "end\n"
	if out.String() != want {
		t.Errorf("Read gave %d bytes, want the %d of the line once under one timestamp", out.Len(), len(want))
	}
}
