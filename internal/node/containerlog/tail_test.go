package containerlog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// segmentsFrom returns what an assembler passes on reading f from start,
// formatted with timestamps, as Read without Follow does.
func segmentsFrom(t *testing.T, f *os.File, start, size int64) []string {
	t.Helper()
	var segs []string
	out := &output{timestamps: true, remain: -1}
	asm := &assembler{emit: func(s segment) error {
		var b strings.Builder
		out.w = &b
		if err := out.write(s); err != nil {
			return err
		}
		segs = append(segs, b.String())
		return nil
	}}
	if err := readLines(t.Context(), &lineReader{f: f, off: start, limit: size}, asm); err != nil {
		t.Fatal(err)
	}
	if err := asm.flush(); err != nil {
		t.Fatal(err)
	}
	return segs
}

func last(s []string, n int) []string { return s[max(0, len(s)-n):] }

// TestTailRandom checks tail against reading everything, on logs where both
// streams write lines split into pieces that interleave, with blocks small
// enough for records to straddle them.
func TestTailRandom(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			var steps []step
			for range 10 + rng.IntN(30) {
				name := []string{Stdout, Stderr}[rng.IntN(2)]
				var b strings.Builder
				for range 1 + rng.IntN(8) {
					if rng.IntN(4) == 0 {
						b.WriteByte('\n')
					} else {
						b.WriteByte(byte('a' + rng.IntN(26)))
					}
				}
				steps = append(steps, step{stream: name, data: b.String()})
			}
			path := writeLog(t, 3, steps)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			size := fi.Size()
			all := segmentsFrom(t, f, 0, size)

			for n := 1; n <= len(all)+1; n++ {
				want := strings.Join(last(all, n), "")
				for _, block := range []int{7, 64, tailBlock} {
					start, err := tailStart(f, size, n, block)
					if err != nil {
						t.Fatal(err)
					}
					if got := strings.Join(last(segmentsFrom(t, f, start, size), n), ""); got != want {
						t.Fatalf("tail %d, block %d, from %d: %q, want %q", n, block, start, got, want)
					}
				}
				var out strings.Builder
				if err := Read(t.Context(), path, Options{Tail: n, Timestamps: true}, &out, nil); err != nil {
					t.Fatal(err)
				}
				if out.String() != want {
					t.Fatalf("Read tail %d = %q, want %q", n, out.String(), want)
				}
			}
		})
	}
}

// TestTailReadsTheEnd checks that tail of a large file reads near its end
// only.
func TestTailReadsTheEnd(t *testing.T) {
	const n = 20000
	var b strings.Builder
	for i := range n {
		stream := Stdout
		if i%3 == 0 {
			stream = Stderr
		}
		fmt.Fprintf(&b, "%s %s F line %d\n", ts(i), stream, i)
	}
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	size := int64(b.Len())
	start, err := tailStart(f, size, 10, 4096)
	if err != nil {
		t.Fatal(err)
	}
	// The last stdout line before the tail lines is no further back than
	// its stream's previous record: a few records before them.
	if size-start > 1024 {
		t.Errorf("tail 10 starts %d bytes before the end of %d", size-start, size)
	}
	var out strings.Builder
	if err := Read(t.Context(), path, Options{Tail: 3}, &out, nil); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("line %d\nline %d\nline %d\n", n-3, n-2, n-1); out.String() != want {
		t.Errorf("Read tail 3 = %q, want %q", out.String(), want)
	}
}
