package containerlog

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Tags of a record: F ends a line, P is a piece of a longer one (or of one
// whose stream closed before its newline).
const (
	tagFull    = "F"
	tagPartial = "P"
)

// record is one line of a log file.
type record struct {
	time    time.Time
	stream  string
	partial bool
	// msg is the message without the newline that ends the record. It may
	// alias the parsed line.
	msg []byte
}

// appendRecord appends the record of msg, newline included, to b.
func appendRecord(b []byte, t time.Time, stream string, partial bool, msg []byte) []byte {
	b = t.UTC().AppendFormat(b, timeFormat)
	b = append(b, ' ')
	b = append(b, stream...)
	b = append(b, ' ')
	if partial {
		b = append(b, tagPartial...)
	} else {
		b = append(b, tagFull...)
	}
	b = append(b, ' ')
	b = append(b, msg...)
	return append(b, '\n')
}

var errMalformed = errors.New("malformed record")

// parseRecord parses line, a record without its newline. It accepts what
// kubelet accepts: any RFC 3339 timestamp, and tags with colon-separated
// extensions ("F:x"), of which only the first is read; any first tag but P
// ends a line.
func parseRecord(line []byte) (record, error) {
	var r record
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return r, fmt.Errorf("%w: no timestamp", errMalformed)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("%w: timestamp: %w", errMalformed, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, fmt.Errorf("%w: no stream", errMalformed)
	}
	switch string(stream) {
	case Stdout:
		r.stream = Stdout
	case Stderr:
		r.stream = Stderr
	default:
		return r, fmt.Errorf("%w: unknown stream %q", errMalformed, stream)
	}
	tags, msg, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, fmt.Errorf("%w: no tag", errMalformed)
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	r.partial = string(tag) == tagPartial
	r.time, r.msg = t, msg
	return r, nil
}

// streamIndex numbers the two streams for per-stream state.
func streamIndex(stream string) int {
	if stream == Stderr {
		return 1
	}
	return 0
}
