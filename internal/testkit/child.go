//go:build unix

package testkit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Child is a process a bench harness started, in a process group of its
// own (ChildAttr), whose end is watched.
type Child struct {
	Cmd   *exec.Cmd
	stdin io.WriteCloser // held open by StartReadLine; Stop closes it
	done  chan struct{}  // closed when the process has ended
	err   error          // how it ended, once done is closed
}

// SelfCommand returns a command that runs this program again with env
// added to its environment: a harness's backends, load generators and
// servers are its own binary in another role, so that the harness's
// runtime and CPU profile hold only what it measures. The command gets
// ChildAttr and this program's standard error.
func SelfCommand(env ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = ChildAttr()
	return cmd, nil
}

// Start starts cmd with ChildAttr and watches for its end.
func Start(cmd *exec.Cmd) (*Child, error) {
	cmd.SysProcAttr = ChildAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{Cmd: cmd, done: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	return c, nil
}

// StartReadLine starts cmd with its standard input held open and returns
// the first line it prints, without the line end: a child that serves
// announces its addresses so, and serves until its input closes (Stop
// closes it; so does this program's death).
func StartReadLine(cmd *exec.Cmd) (*Child, string, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	// A pipe of our own rather than StdoutPipe, which Wait closes: the
	// watcher waits from the start, and the line must still be readable.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	cmd.Stdout = w
	c, err := Start(cmd)
	w.Close()
	if err != nil {
		return nil, "", err
	}
	c.stdin = stdin
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		c.Stop(nil, 3*time.Second)
		return nil, "", fmt.Errorf("reading the first line: %w (%v)", err, c.err)
	}
	return c, strings.TrimRight(line, "\r\n"), nil
}

// WaitAccept waits until each of addrs accepts a TCP connection, within
// timeout for all. It gives up early when the child ends first.
func (c *Child) WaitAccept(timeout time.Duration, addrs ...string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	pending := addrs
	err := Poll(ctx, timeout, func(ctx context.Context) error {
		for len(pending) > 0 {
			conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", pending[0])
			if err != nil {
				return err
			}
			_ = conn.Close()
			pending = pending[1:]
		}
		return nil
	})
	select {
	case <-c.done:
		if err != nil {
			return fmt.Errorf("exited (%v) before accepting on %s", c.err, pending[0])
		}
	default:
	}
	if err != nil {
		return fmt.Errorf("%s does not accept: %w", pending[0], err)
	}
	return nil
}

// Stop asks the child to end: it closes the child's standard input if
// StartReadLine holds it, and sends sig unless sig is nil. After grace it
// kills the child's process group; and it kills the group once more after
// the child ended, for workers that outlive their parent (nginx's).
func (c *Child) Stop(sig os.Signal, grace time.Duration) {
	if c.stdin != nil {
		_ = c.stdin.Close()
	}
	if sig != nil {
		_ = c.Cmd.Process.Signal(sig)
	}
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = syscall.Kill(-c.Cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
	_ = syscall.Kill(-c.Cmd.Process.Pid, syscall.SIGKILL)
}
