// Package controlplane starts the parts of a local Kubernetes control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok) as
// processes on loopback. The test fleet and `fleetnetctl dev` share it, so a
// test cluster and a developer's cluster are started the same way.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is one running binary whose output goes to a log file.
type Process struct {
	Name    string
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartOptions says how a process is started.
type StartOptions struct {
	// Detach starts the process in a session of its own that outlives the
	// caller (for `fleetnetctl dev up`). Otherwise the process is killed when
	// the calling thread's process dies, so a test that times out leaves no
	// orphans behind.
	Detach bool
}

// Start runs path with args, its stdout and stderr appended to logPath.
func Start(name, path string, args []string, logPath string, opts StartOptions) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if opts.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop asks the process to end with SIGTERM and kills it when it has not
// ended within grace. It returns once the process is gone.
func (p *Process) Stop(grace time.Duration) {
	if exited, _ := p.Exited(); exited {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// WaitFor polls check until it succeeds, the process exits, or ctx ends. The
// error then names the last failure of check and the tail of the log.
func (p *Process) WaitFor(ctx context.Context, what string, check func(context.Context) error) error {
	var last error
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited (%v) before %s; last lines of %s:\n%s", p.Name, err, what, p.LogPath, Tail(p.LogPath, 20))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: timed out waiting for %s: %w; last lines of %s:\n%s", p.Name, what, errors.Join(ctx.Err(), last), p.LogPath, Tail(p.LogPath, 20))
		case <-ticker.C:
		}
	}
}

// Tail returns the last n lines of a file, for error messages.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// HTTPOK checks that url answers 200 OK within 2 seconds, for WaitFor on
// a health or readiness endpoint.
func HTTPOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
