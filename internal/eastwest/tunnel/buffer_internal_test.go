package tunnel

import (
	"bytes"
	"testing"
)

// A buffer holds what each read put in it until the next read, whatever
// the sizes: small, full, large, then small again.
func TestBufferKeepsEachRead(t *testing.T) {
	var b buffer
	defer b.release()
	for i, n := range []int{100, 16 << 10, 16 << 10, 200 << 10, 55296, 16<<10 - 1, 16 << 10, 256 << 10, 1, 0} {
		dst := b.next()
		if n > len(dst) {
			n = len(dst)
		}
		want := bytes.Repeat([]byte{byte(i + 1)}, n)
		copy(dst, want)
		b.used(n)
		if got := b.b[:n]; !bytes.Equal(got, want) {
			t.Fatalf("read %d of %d bytes: the buffer holds other bytes", i, n)
		}
	}
	if largeInUse.Load() > 1 {
		t.Errorf("%d large buffers counted in use, want at most this one", largeInUse.Load())
	}
}

// Past maxLarge, buffers stay small.
func TestLargeBuffersAreCapped(t *testing.T) {
	bufs := make([]buffer, maxLarge+5)
	for i := range bufs {
		bufs[i].next()
		bufs[i].used(len(bufs[i].small))
	}
	large := 0
	for i := range bufs {
		if bufs[i].large != nil {
			large++
		}
		bufs[i].release()
	}
	if large != maxLarge || largeInUse.Load() != 0 {
		t.Errorf("%d large buffers taken of %d wanted, %d counted after release; want %d, 0", large, len(bufs), largeInUse.Load(), maxLarge)
	}
}
