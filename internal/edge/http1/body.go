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
		line, err := readLine(src)
		if err != nil {
			return total, err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		for len(line) > 0 && (line[len(line)-1] == ' ' || line[len(line)-1] == '\t') {
			line = line[:len(line)-1]
		}
		if len(line) == 0 || len(line) > 15 {
			return total, ErrChunked
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
				return total, ErrChunked
			}
			size = size<<4 | int64(c)
		}
		if size == 0 {
			return total, copyTrailers(dst, src, keep)
		}
		if _, err := dst.WriteString(strconv.FormatInt(size, 16)); err != nil {
			return total, err
		}
		if _, err := dst.WriteString("\r\n"); err != nil {
			return total, err
		}
		n, err := io.CopyN(dst, src, size)
		total += n
		if err != nil {
			return total, unexpected(err)
		}
		if crlf, err := readLine(src); err != nil || len(crlf) != 0 {
			return total, ErrChunked
		}
		if _, err := dst.WriteString("\r\n"); err != nil {
			return total, err
		}
	}
}

func copyTrailers(dst *bufio.Writer, src *bufio.Reader, keep func([]byte) bool) error {
	if _, err := dst.WriteString("0\r\n"); err != nil {
		return err
	}
	seen := 0
	for {
		line, err := readLine(src)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			_, err := dst.WriteString("\r\n")
			return err
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
		if keep != nil && !keep(line[:colon]) {
			continue
		}
		if _, err := dst.Write(line); err != nil {
			return err
		}
		if _, err := dst.WriteString("\r\n"); err != nil {
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
