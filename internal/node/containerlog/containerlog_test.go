package containerlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPath(t *testing.T) {
	tests := []struct {
		name      string
		container string
		restart   int
		previous  bool
		want      string // empty when an error is wanted
		notExist  bool   // the error wraps os.ErrNotExist
	}{
		{name: "first run", container: "app", restart: 0, want: "/logs/app/0.log"},
		{name: "restarted", container: "app", restart: 3, want: "/logs/app/3.log"},
		{name: "previous", container: "app", restart: 3, previous: true, want: "/logs/app/2.log"},
		{name: "previous of first run", container: "app", restart: 0, previous: true, notExist: true},
		{name: "negative restart", container: "app", restart: -1},
		{name: "empty name", container: "", restart: 0},
		{name: "dot dot", container: "..", restart: 0},
		{name: "slash", container: "a/b", restart: 0},
		{name: "backslash", container: `a\b`, restart: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PathFor("/logs", tt.container, tt.restart, Options{Previous: tt.previous})
			if tt.want == "" {
				if err == nil {
					t.Fatalf("PathFor = %q, want an error", got)
				}
				if errors.Is(err, os.ErrNotExist) != tt.notExist {
					t.Errorf("error %v: wraps os.ErrNotExist = %t, want %t", err, !tt.notExist, tt.notExist)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != filepath.FromSlash(tt.want) {
				t.Errorf("PathFor = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOptionsSince(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := []struct {
		name string
		opts Options
		want time.Time
	}{
		{name: "none", want: time.Time{}},
		{name: "seconds", opts: Options{SinceSeconds: 60}, want: now.Add(-time.Minute)},
		{name: "time", opts: Options{SinceTime: t0}, want: t0},
		{name: "later time wins", opts: Options{SinceSeconds: 3600 * 2, SinceTime: t0}, want: t0},
		{name: "later seconds win", opts: Options{SinceSeconds: 60, SinceTime: t0}, want: now.Add(-time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.opts.since(now); !got.Equal(tt.want) {
				t.Errorf("since = %v, want %v", got, tt.want)
			}
		})
	}
}
