package containerlog

import (
	"errors"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		time    time.Time
		stream  string
		partial bool
		msg     string
		want    string
	}{
		{name: "full", time: t0, stream: Stdout, msg: "hello world", want: ts(0) + " stdout F hello world\n"},
		{name: "partial", time: t0, stream: Stderr, partial: true, msg: "hel", want: ts(0) + " stderr P hel\n"},
		{name: "empty", time: t0, stream: Stdout, msg: "", want: ts(0) + " stdout F \n"},
		{name: "spaces kept", time: t0, stream: Stdout, msg: "  a  b ", want: ts(0) + " stdout F   a  b \n"},
		{
			name: "other zone written as UTC", time: time.Date(2025, 3, 1, 14, 0, 0, 5, time.FixedZone("x", 2*3600)),
			stream: Stdout, msg: "m", want: "2025-03-01T12:00:00.000000005Z stdout F m\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := appendRecord(nil, tt.time, tt.stream, tt.partial, []byte(tt.msg))
			if string(b) != tt.want {
				t.Fatalf("appendRecord = %q, want %q", b, tt.want)
			}
			r, err := parseRecord(b[:len(b)-1])
			if err != nil {
				t.Fatal(err)
			}
			if !r.time.Equal(tt.time) || r.stream != tt.stream || r.partial != tt.partial || string(r.msg) != tt.msg {
				t.Errorf("parseRecord = %+v, want time %v stream %s partial %t msg %q", r, tt.time, tt.stream, tt.partial, tt.msg)
			}
		})
	}
}

// TestParseRecord covers records of other writers that kubelet accepts, and
// lines it skips.
func TestParseRecord(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		time    time.Time
		stream  string
		partial bool
		msg     string
		bad     bool
	}{
		{
			name: "containerd trims zeros", line: "2016-10-06T00:17:09.6697942Z stdout F log content 1",
			time: time.Date(2016, 10, 6, 0, 17, 9, 669794200, time.UTC), stream: Stdout, msg: "log content 1",
		},
		{
			name: "zone offset", line: "2016-10-06T02:17:09+02:00 stderr P x",
			time: time.Date(2016, 10, 6, 0, 17, 9, 0, time.UTC), stream: Stderr, partial: true, msg: "x",
		},
		{name: "tag extension", line: ts(0) + " stdout P:x y", time: t0, stream: Stdout, partial: true, msg: "y"},
		{name: "unknown tag ends a line", line: ts(0) + " stdout X y", time: t0, stream: Stdout, msg: "y"},
		{name: "no timestamp", line: "garbage", bad: true},
		{name: "bad timestamp", line: "yesterday stdout F x", bad: true},
		{name: "unknown stream", line: ts(0) + " stdin F x", bad: true},
		{name: "no tag", line: ts(0) + " stdout", bad: true},
		{name: "no message separator", line: ts(0) + " stdout F", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseRecord([]byte(tt.line))
			if tt.bad {
				if !errors.Is(err, errMalformed) {
					t.Fatalf("parseRecord = %+v, %v; want errMalformed", r, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !r.time.Equal(tt.time) || r.stream != tt.stream || r.partial != tt.partial || string(r.msg) != tt.msg {
				t.Errorf("parseRecord = %+v, want time %v stream %s partial %t msg %q", r, tt.time, tt.stream, tt.partial, tt.msg)
			}
		})
	}
}
