package containerlog

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestWriterRecords(t *testing.T) {
	tests := []struct {
		name    string
		maxLine int
		steps   []step
		want    string
	}{
		{
			name:  "lines of one write share a timestamp",
			steps: []step{{stream: Stdout, data: "a\nb\n"}},
			want:  lines(ts(0)+" stdout F a", ts(0)+" stdout F b"),
		},
		{
			name:  "line across writes",
			steps: []step{{stream: Stdout, data: "ab"}, {stream: Stdout, data: "c\nd"}, {stream: Stdout, data: "\n"}},
			want:  lines(ts(0)+" stdout F abc", ts(1)+" stdout F d"),
		},
		{
			name:  "empty line",
			steps: []step{{stream: Stderr, data: "\n"}},
			want:  lines(ts(0) + " stderr F "),
		},
		{
			name:    "long line split into P then F",
			maxLine: 4,
			steps:   []step{{stream: Stdout, data: "abcdefghij\n"}},
			want:    lines(ts(0)+" stdout P abcd", ts(0)+" stdout P efgh", ts(0)+" stdout F ij"),
		},
		{
			name:    "multiple of the maximum ends with a full F",
			maxLine: 4,
			steps:   []step{{stream: Stdout, data: "abcdefgh\n"}},
			want:    lines(ts(0)+" stdout P abcd", ts(0)+" stdout F efgh"),
		},
		{
			name:    "line of the maximum is one record",
			maxLine: 4,
			steps:   []step{{stream: Stdout, data: "abcd\n"}},
			want:    lines(ts(0) + " stdout F abcd"),
		},
		{
			name:    "unfinished long line written as it grows",
			maxLine: 4,
			steps:   []step{{stream: Stdout, data: "abcdef"}, {stream: Stdout, data: "gh\n"}},
			want:    lines(ts(0)+" stdout P abcd", ts(1)+" stdout F efgh"),
		},
		{
			name:  "unterminated line written as P at stream close",
			steps: []step{{stream: Stdout, data: "a\nb"}, {stream: Stdout, close: true}},
			want:  lines(ts(0)+" stdout F a", ts(1)+" stdout P b"),
		},
		{
			name:  "unterminated line written as P at writer close",
			steps: []step{{stream: Stderr, data: "x"}},
			want:  lines(ts(0) + " stderr P x"),
		},
		{
			name:  "close with nothing pending writes nothing",
			steps: []step{{stream: Stdout, data: "a\n"}, {stream: Stdout, close: true}},
			want:  lines(ts(0) + " stdout F a"),
		},
		{
			name: "streams buffer their own lines",
			steps: []step{
				{stream: Stdout, data: "out"},
				{stream: Stderr, data: "err\n"},
				{stream: Stdout, data: "put\n"},
			},
			want: lines(ts(0)+" stderr F err", ts(1)+" stdout F output"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeLog(t, tt.maxLine, tt.steps)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("file:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestWriterErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c", "0.log")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })

	if _, err := w.Stream("stdin").Write([]byte("x\n")); err == nil {
		t.Error("write to an unknown stream succeeded")
	}
	s := w.Stream(Stdout)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("x\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after stream Close: %v, want os.ErrClosed", err)
	}
	open := w.Stream(Stderr)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := open.Write([]byte("x\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after Writer Close: %v, want os.ErrClosed", err)
	}
	if _, err := w.Stream(Stdout).Write([]byte("x\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write to a stream of a closed Writer: %v, want os.ErrClosed", err)
	}
}

func TestOpenAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "0.log")
	for i := range 2 {
		w, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		w.Now = newTicker().now
		if _, err := w.Stream(Stdout).Write(fmt.Appendf(nil, "run %d\n", i)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := lines(ts(0)+" stdout F run 0", ts(0)+" stdout F run 1"); string(got) != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
}

// TestConcurrentStreams writes both streams from several goroutines in
// writes of random sizes, lines longer than MaxLine among them, and checks
// that every record is whole and each stream's lines come back intact.
func TestConcurrentStreams(t *testing.T) {
	const (
		maxLine   = 64
		perWriter = 300
	)
	path := filepath.Join(t.TempDir(), "0.log")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w.MaxLine = maxLine

	// One writer goroutine per stream, as a process's pipes have; two
	// streams of the same name would interleave their lines legitimately.
	want := map[string][]string{}
	var wg sync.WaitGroup
	for i, name := range []string{Stdout, Stderr} {
		rng := rand.New(rand.NewPCG(1, uint64(i)))
		var text strings.Builder
		for j := range perWriter {
			line := fmt.Sprintf("%s-%d-%s", name, j, strings.Repeat(string(rune('a'+j%26)), rng.IntN(3*maxLine)))
			want[name] = append(want[name], line)
			text.WriteString(line + "\n")
		}
		data := text.String()
		var sizes []int
		for rest := len(data); rest > 0; {
			n := min(rest, 1+rng.IntN(200))
			sizes = append(sizes, n)
			rest -= n
		}
		s := w.Stream(name)
		wg.Go(func() {
			rest := data
			for _, n := range sizes {
				if _, err := s.Write([]byte(rest[:n])); err != nil {
					t.Error(err)
					return
				}
				rest = rest[n:]
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	got := map[string][]string{}
	var open [2]strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		r, err := parseRecord(sc.Bytes())
		if err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		if len(r.msg) > maxLine {
			t.Errorf("record of %d bytes, more than %d", len(r.msg), maxLine)
		}
		b := &open[streamIndex(r.stream)]
		b.Write(r.msg)
		if !r.partial {
			got[r.stream] = append(got[r.stream], b.String())
			b.Reset()
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "file", got, want)

	// Read joins the same lines back, each on a line of its own.
	var out strings.Builder
	if err := Read(t.Context(), path, Options{}, &out, nil); err != nil {
		t.Fatal(err)
	}
	got = map[string][]string{}
	for line := range strings.Lines(out.String()) {
		name, _, _ := strings.Cut(line, "-")
		got[name] = append(got[name], strings.TrimSuffix(line, "\n"))
	}
	checkLines(t, "Read", got, want)
}

func checkLines(t *testing.T, source string, got, want map[string][]string) {
	t.Helper()
	for _, name := range []string{Stdout, Stderr} {
		if len(got[name]) != len(want[name]) {
			t.Fatalf("%s: %s: %d lines, want %d", source, name, len(got[name]), len(want[name]))
		}
		for i := range want[name] {
			if got[name][i] != want[name][i] {
				t.Fatalf("%s: %s line %d = %q, want %q", source, name, i, got[name][i], want[name][i])
			}
		}
	}
}
