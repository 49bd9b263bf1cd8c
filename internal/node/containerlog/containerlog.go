// Package containerlog is the container log store of a process node: the node
// pipes each container's stdout and stderr into a Writer, and the kubelet API
// (kubectl logs) reads them back with Read.
//
// Files use the CRI logging format that kubelet reads, one record a line:
//
//	<timestamp> <stdout|stderr> <F|P> <message>
//
// A line longer than the writer's maximum is cut into records tagged P
// (partial) followed by one tagged F (full). As containerd does, output that
// ends without a newline when its stream closes is written as P, so that
// reading gives back exactly the bytes the process wrote.
//
// Each run of a container has its own file (see Path); nothing is rotated.
package containerlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Stream names, as they appear in records.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// DefaultMaxLine is the longest message of one record when Writer.MaxLine is
// zero; kubelet's default for containerd is the same 16 KiB.
const DefaultMaxLine = 16 << 10

// timeFormat is how timestamps are written, on disk and in Read's output with
// Options.Timestamps. It is RFC 3339 with nanoseconds of fixed width (kubelet's
// RFC3339NanoFixed), so records of one file sort as text and prefixes line up.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Options selects what Read returns. It mirrors virtual-kubelet's
// api.ContainerLogOpts field for field, so the node converts one into the
// other; the zero value asks for the whole log once.
type Options struct {
	// Tail is how many of the last lines to return; zero or less means all.
	// virtual-kubelet leaves it at zero when the request has no tailLines,
	// so zero cannot mean "none" as it does for kubelet.
	Tail int
	// LimitBytes caps the bytes written, the cut falling anywhere in a line
	// as kubelet's does; zero or less means no cap.
	LimitBytes int
	// Timestamps prefixes each line with its record's timestamp and a space.
	Timestamps bool
	// Follow keeps reading what the container appends until it stops
	// running.
	Follow bool
	// Previous asks for the run before the current one (see PathFor). That
	// run has ended, so Read does not follow it.
	Previous bool
	// SinceSeconds drops lines older than this many seconds before now; zero
	// or less means no limit.
	SinceSeconds int
	// SinceTime drops lines older than this time; the zero time means no
	// limit. With SinceSeconds too, the later of the two applies, as in
	// kubelet.
	SinceTime time.Time
}

// since is the oldest time of a line to return, the zero time for all.
func (o Options) since(now time.Time) time.Time {
	var t time.Time
	if o.SinceSeconds > 0 {
		t = now.Add(-time.Duration(o.SinceSeconds) * time.Second)
	}
	if o.SinceTime.After(t) {
		t = o.SinceTime
	}
	return t
}

// Path is the log file of one run of a container: <dir>/<container>/<restart>.log,
// restart counting the container's restarts from 0. The name is refused if it
// could leave its directory; Kubernetes already restricts container names to
// DNS labels, so this only guards against a caller that skipped validation.
func Path(dir, container string, restart int) (string, error) {
	if container == "" || container == "." || container == ".." ||
		strings.ContainsAny(container, `/\`+"\x00") {
		return "", fmt.Errorf("container log: invalid container name %q", container)
	}
	if restart < 0 {
		return "", fmt.Errorf("container log: negative restart count %d for container %q", restart, container)
	}
	return filepath.Join(dir, container, strconv.Itoa(restart)+".log"), nil
}

// PathFor is Path for a request: the run restart, or with opts.Previous the
// run before it. A container that never restarted has no previous run; the
// error then wraps os.ErrNotExist, like a missing file does in Read.
func PathFor(dir, container string, restart int, opts Options) (string, error) {
	if opts.Previous {
		if restart == 0 {
			return "", fmt.Errorf("container log: container %q has no previous run: %w", container, os.ErrNotExist)
		}
		restart--
	}
	return Path(dir, container, restart)
}
