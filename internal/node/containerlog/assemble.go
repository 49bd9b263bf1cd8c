package containerlog

import "time"

// maxJoin bounds how much of one line a reader holds while joining its
// records. A process may print without newlines for ever; past this size the
// line is passed on in pieces, the first carrying its timestamp.
const maxJoin = 1 << 20

// segment is what the assembler passes on: a whole line, or a piece of one
// when the line exceeds maxJoin or is unfinished when reading ends.
type segment struct {
	// time is the time of the line's first record: the since filters
	// keep or drop all of a line's pieces together.
	time time.Time
	// data is without the newline. It is only valid during the call that
	// receives it.
	data []byte
	// head is set on a line's first piece, which timestamps prefix.
	head bool
	// end is set on a line's last piece, which a newline ends.
	end bool
}

// openLine is a stream's line whose F record has not come yet.
type openLine struct {
	started bool
	time    time.Time
	data    []byte
	// passed is set once a piece of the line was passed on.
	passed bool
	// last orders open lines by their latest record, for flush.
	last uint64
}

// assembler joins each stream's records back into lines. It joins per
// stream, not per file: the P records of a long stdout line can have stderr
// records between them. Lines are passed on in the order they end, which
// for a line still open when reading stops is its latest record (tailStart
// counts lines in the same order).
type assembler struct {
	emit  func(segment) error
	lines [2]openLine
	seq   uint64
}

// add takes the next record of the file.
func (a *assembler) add(r record) error {
	l := &a.lines[streamIndex(r.stream)]
	if !l.started {
		l.started, l.time = true, r.time
	}
	a.seq++
	l.last = a.seq
	l.data = append(l.data, r.msg...)
	switch {
	case !r.partial:
		return a.pass(l, true)
	case len(l.data) >= maxJoin:
		seg := segment{time: l.time, data: l.data, head: !l.passed}
		l.data, l.passed = l.data[:0], true
		return a.emit(seg)
	}
	return nil
}

// flush passes on the open lines, unfinished. Reading calls it when the
// file will not grow any more: a line whose stream closed without a newline
// ends with a P record.
func (a *assembler) flush() error {
	first, second := &a.lines[0], &a.lines[1]
	if second.started && (!first.started || second.last < first.last) {
		first, second = second, first
	}
	for _, l := range []*openLine{first, second} {
		if l.started {
			if err := a.pass(l, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// pass passes on the rest of l and forgets it.
func (a *assembler) pass(l *openLine, end bool) error {
	seg := segment{time: l.time, data: l.data, head: !l.passed, end: end}
	*l = openLine{data: l.data[:0]}
	return a.emit(seg)
}
