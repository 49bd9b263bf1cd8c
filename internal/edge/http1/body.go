package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// maxChunkLine bounds a chunk's size line with its extensions, and each
// trailer line.
const maxChunkLine = 4096

// maxTrailerBytes bounds a chunked body's trailer section.
const maxTrailerBytes = 16 << 10

// ErrChunked is a malformed chunked body.
var ErrChunked = errors.New("http1: malformed chunked body")

// CopyChunked relays a chunked body from src to dst, framed again as it is
// read: sizes checked, chunk extensions dropped, trailer fields checked as
// header fields and passed on. It returns the bytes of data relayed.
// progress, when set, is called before each chunk is read (to extend a
// read deadline).
func CopyChunked(dst *bufio.Writer, src *bufio.Reader, progress func()) (int64, error) {
	return CopyChunkedTrailers(dst, src, progress, nil)
}

// CopyChunkedTrailers is CopyChunked passing on only the trailer fields
// keep keeps (all when nil).
func CopyChunkedTrailers(dst *bufio.Writer, src *bufio.Reader, progress func(), keep func(name []byte) bool) (int64, error) {
	var total int64
	for {
		if progress != nil {
			progress()
		}
		size, err := readChunkSize(src)
		if err != nil {
			return total, err
		}
		if size == 0 {
			if _, err := dst.WriteString("0\r\n"); err != nil {
				return total, err
			}
			err := readTrailers(src, func(line []byte, colon int) error {
				if keep != nil && !keep(line[:colon]) {
					return nil
				}
				if _, err := dst.Write(line); err != nil {
					return err
				}
				_, err := dst.WriteString("\r\n")
				return err
			})
			if err != nil {
				return total, err
			}
			_, err = dst.WriteString("\r\n")
			return total, err
		}
		if _, err := dst.WriteString(strconv.FormatInt(size, 16)); err != nil {
			return total, err
		}
		if _, err := dst.WriteString("\r\n"); err != nil {
			return total, err
		}
		n, err := copyChunkData(dst, src, size)
		total += n
		if err != nil {
			return total, err
		}
		if _, err := dst.WriteString("\r\n"); err != nil {
			return total, err
		}
	}
}

// DecodeChunked copies a chunked body's data from src to dst, without
// its framing: sizes checked, chunk extensions dropped, each trailer
// field checked as a header field and handed to trailer (its name and
// value valid only during the call). chunkDone, when set, is called after
// each chunk (to pass on what arrived while the next one may take long).
// It returns the bytes of data copied.
func DecodeChunked(dst io.Writer, src *bufio.Reader, chunkDone func() error, trailer func(name, value []byte)) (int64, error) {
	var total int64
	for {
		size, err := readChunkSize(src)
		if err != nil {
			return total, err
		}
		if size == 0 {
			return total, readTrailers(src, func(line []byte, colon int) error {
				if trailer != nil {
					trailer(line[:colon], bytes.TrimSpace(line[colon+1:]))
				}
				return nil
			})
		}
		n, err := copyChunkData(dst, src, size)
		total += n
		if err != nil {
			return total, err
		}
		if chunkDone != nil {
			if err := chunkDone(); err != nil {
				return total, err
			}
		}
	}
}

// readChunkSize reads a chunk's size line, extensions dropped.
func readChunkSize(src *bufio.Reader) (int64, error) {
	line, err := readLine(src)
	if err != nil {
		return 0, err
	}
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	for len(line) > 0 && (line[len(line)-1] == ' ' || line[len(line)-1] == '\t') {
		line = line[:len(line)-1]
	}
	if len(line) == 0 || len(line) > 15 {
		return 0, ErrChunked
	}
	var size int64
	for _, c := range line {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, ErrChunked
		}
		size = size<<4 | int64(c)
	}
	return size, nil
}

// copyChunkData copies a chunk's data and reads the CRLF after it.
func copyChunkData(dst io.Writer, src *bufio.Reader, size int64) (int64, error) {
	n, err := io.CopyN(dst, src, size)
	if err != nil {
		return n, unexpected(err)
	}
	if crlf, err := readLine(src); err != nil || len(crlf) != 0 {
		return n, ErrChunked
	}
	return n, nil
}

// readTrailers reads the trailer section up to its empty line, handing
// each field line, checked as a header field, to field with the index of
// its colon.
func readTrailers(src *bufio.Reader, field func(line []byte, colon int) error) error {
	seen := 0
	for {
		line, err := readLine(src)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		seen += len(line)
		colon := bytes.IndexByte(line, ':')
		if seen > maxTrailerBytes || colon <= 0 || !isToken(line[:colon]) {
			return ErrChunked
		}
		for _, c := range line[colon+1:] {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return ErrChunked
			}
		}
		if err := field(line, colon); err != nil {
			return err
		}
	}
}

// readLine reads a CRLF-terminated line of at most maxChunkLine bytes;
// the line is valid until the next read from src.
func readLine(src *bufio.Reader) ([]byte, error) {
	line, err := src.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, ErrChunked
		}
		return nil, unexpected(err)
	}
	if len(line) > maxChunkLine || len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, ErrChunked
	}
	line = line[:len(line)-2]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, ErrChunked
	}
	return line, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// CopyAsChunks relays src, up to its end, to dst in the chunked coding,
// through buf: for a response delimited by the end of its connection,
// passed on over a connection that stays open.
func CopyAsChunks(dst *bufio.Writer, src io.Reader, buf []byte) (int64, error) {
	var total int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			total += int64(n)
			if _, werr := dst.WriteString(strconv.FormatInt(int64(n), 16)); werr != nil {
				return total, werr
			}
			_, _ = dst.WriteString("\r\n")
			_, _ = dst.Write(buf[:n])
			if _, werr := dst.WriteString("\r\n"); werr != nil {
				return total, werr
			}
			// The reader may wait long for more: pass on what arrived.
			if werr := dst.Flush(); werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			_, werr := dst.WriteString("0\r\n\r\n")
			return total, werr
		}
		if err != nil {
			return total, err
		}
	}
}
