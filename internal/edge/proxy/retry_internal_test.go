package proxy

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// A request body is replayed from its start while no more than maxReplay
// bytes of it were read, whichever reader read them.
func TestReplayBody(t *testing.T) {
	long := strings.Repeat("x", maxReplay+1)
	tests := []struct {
		name      string
		body      string
		firstRead int // bytes the first reader reads before the replay
		replay    bool
	}{
		{name: "unread", body: "payload", firstRead: 0, replay: true},
		{name: "partly read", body: "payload", firstRead: 3, replay: true},
		{name: "read through", body: "payload", firstRead: len("payload"), replay: true},
		{name: "at the bound", body: long[:maxReplay], firstRead: maxReplay, replay: true},
		{name: "over the bound", body: long, firstRead: len(long), replay: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := &replayBody{src: io.NopCloser(strings.NewReader(tt.body))}
			first := &replayReader{body: rb}
			if _, err := io.CopyN(io.Discard, first, int64(tt.firstRead)); err != nil {
				t.Fatal(err)
			}
			again, err := rb.again()
			if !tt.replay {
				if err == nil {
					t.Fatal("again after more than maxReplay bytes: no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(again)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, []byte(tt.body)) {
				t.Fatalf("replayed %d bytes, want the body's %d", len(got), len(tt.body))
			}
			// And once more, from a reader that read it all.
			third, err := rb.again()
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := io.ReadAll(third); !bytes.Equal(got, []byte(tt.body)) {
				t.Fatalf("second replay: %d bytes, want %d", len(got), len(tt.body))
			}
		})
	}
}
