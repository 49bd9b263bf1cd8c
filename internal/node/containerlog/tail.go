package containerlog

import (
	"bytes"
	"fmt"
	"io"
)

const (
	// tailBlock is how much tailStart reads at a time.
	tailBlock = 64 << 10
	// tailSlack bounds how far tailStart looks back, once it has its lines,
	// for earlier P records of a line it counted. Such records are close
	// before the line's F unless the other stream wrote much in between;
	// past the bound, Read shows that line from where it found it.
	tailSlack = 4 << 20
)

// tailStart returns an offset of f, a log file of size bytes, from which
// reading gives at least the last n lines, reading the file backwards in
// blocks of block bytes rather than all of it. Reading from the offset can
// also give earlier lines or pieces of them (records of two streams
// interleave); Read counts what it gets and skips the excess.
//
// A line ends with an F record, or with a P record that is the last of its
// stream in the file (its stream closed without a newline, or is still
// writing the line). Its earlier records are the P records of the same
// stream back to the stream's previous line.
func tailStart(f io.ReaderAt, size int64, n, block int) (int64, error) {
	var (
		count int
		start = size
		// seen: a later record of the stream was seen.
		// open: a counted line of the stream may have earlier records.
		// done: the stream's remaining records are all before the lines.
		seen, open, done [2]bool
	)
	err := scanBackward(f, size, block, func(off int64, line []byte) bool {
		r, err := parseRecord(line)
		if err != nil {
			// Reading skips it too.
			return false
		}
		i := streamIndex(r.stream)
		ends := !r.partial || !seen[i]
		seen[i] = true
		switch {
		case done[i]:
		case ends && count == n:
			open[i], done[i] = false, true
		case ends:
			count++
			open[i], start = true, off
		case open[i]:
			start = off
		}
		if count < n {
			return false
		}
		return !open[0] && !open[1] || start-off > tailSlack
	})
	if err != nil {
		return 0, err
	}
	return start, nil
}

// scanBackward calls fn with each complete line of f before offset end,
// newline excluded, last line first, until fn returns true. Bytes after the
// last newline belong to a record still being written and are skipped.
func scanBackward(f io.ReaderAt, end int64, block int, fn func(off int64, line []byte) bool) error {
	// acc holds the bytes of f from pos on that are not yet passed to fn.
	var acc []byte
	pos := end
	more := func() error {
		k := int64(block)
		if pos < k {
			k = pos
		}
		b := make([]byte, int(k), int(k)+len(acc))
		if _, err := f.ReadAt(b, pos-k); err != nil {
			return fmt.Errorf("read container log: %w", err)
		}
		acc, pos = append(b, acc...), pos-k
		return nil
	}
	// Drop the unfinished record, if any.
	for {
		if i := bytes.LastIndexByte(acc, '\n'); i >= 0 {
			acc = acc[:i+1]
			break
		}
		if pos == 0 {
			return nil
		}
		if err := more(); err != nil {
			return err
		}
	}
	// acc ends with the newline of the next line to pass.
	for len(acc) > 0 {
		i := bytes.LastIndexByte(acc[:len(acc)-1], '\n')
		if i < 0 && pos > 0 {
			if err := more(); err != nil {
				return err
			}
			continue
		}
		if fn(pos+int64(i+1), acc[i+1:len(acc)-1]) {
			return nil
		}
		acc = acc[:i+1]
	}
	return nil
}
