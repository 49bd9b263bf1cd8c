package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fleetnet/fleetnet/internal/node/containerlog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// process is one run of a container: the init step that became the
// container's command.
type process struct {
	cmd  *exec.Cmd
	log  *containerlog.Writer
	done chan struct{}
	// exit is set when done is closed.
	exit error
}

// start runs the container once, its output going to logPath.
func (p *pod) start(c *corev1.Container, restart int) (*process, error) {
	im, err := LookupImage(c.Image)
	if err != nil {
		return nil, &waitingError{reason: "ErrImagePull", err: err}
	}
	env, err := containerEnv(p.obj, c, p.node.sources, p.node.services)
	if err != nil {
		return nil, &waitingError{reason: "CreateContainerConfigError", err: err}
	}
	argv, err := im.Argv(expandArgs(c.Command, env), expandArgs(c.Args, env), p.node.cfg.Tools)
	if err != nil {
		return nil, &waitingError{reason: "CreateContainerConfigError", err: err}
	}
	spec := InitSpec{
		NetNS:    filepath.Join("/run/netns", p.net.NetNS),
		Hostname: podHostname(p.obj),
		Scratch:  filepath.Join(p.dir, "scratch", c.Name, fmt.Sprint(restart)),
		Argv:     argv,
		Env:      env,
		Dir:      c.WorkingDir,
		Mounts: []Mount{
			{Source: p.net.ResolvConfPath(), Target: "/etc/resolv.conf"},
			{Source: filepath.Join(p.dir, "hosts"), Target: "/etc/hosts"},
		},
	}
	if _, err := os.Stat(p.net.ResolvConfPath()); err != nil {
		spec.Mounts = spec.Mounts[1:]
	}
	for _, m := range c.VolumeMounts {
		src, ok := p.volumes[m.Name]
		if !ok {
			return nil, &waitingError{reason: "CreateContainerConfigError", err: fmt.Errorf("volumeMount %q names no volume of the pod", m.Name)}
		}
		if m.SubPath != "" {
			src = filepath.Join(src, m.SubPath)
			if err := os.MkdirAll(src, 0o755); err != nil && !errors.Is(err, syscall.ENOTDIR) {
				return nil, err
			}
		}
		spec.Mounts = append(spec.Mounts, Mount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	sc := effectiveSecurity(p.obj, c)
	spec.UID, spec.GID = sc.uid, sc.gid
	spec.Groups = sc.groups
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	specPath := filepath.Join(p.dir, "containers", c.Name+".json")
	if err := writeFile(specPath, data, 0o600); err != nil {
		return nil, err
	}
	logPath, err := containerlog.Path(filepath.Join(p.dir, "logs"), c.Name, restart)
	if err != nil {
		return nil, err
	}
	lw, err := containerlog.Open(logPath)
	if err != nil {
		return nil, err
	}
	// The init step holds the write end of a pipe until its exec closes it
	// (close-on-exec): until then the container is being set up, and exec
	// or a probe would enter namespaces that are not finished.
	setupR, setupW, err := os.Pipe()
	if err != nil {
		lw.Close()
		return nil, err
	}
	cmd := exec.Command(p.node.cfg.InitCommand[0], append(p.node.cfg.InitCommand[1:], specPath)...)
	cmd.Stdout = lw.Stream("stdout")
	cmd.Stderr = lw.Stream("stderr")
	cmd.ExtraFiles = []*os.File{setupW} // fd 3 in the child
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: InitCloneFlags, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	setupW.Close()
	if err != nil {
		setupR.Close()
		lw.Close()
		return nil, fmt.Errorf("starting container %s: %w", c.Name, err)
	}
	proc := &process{cmd: cmd, log: lw, done: make(chan struct{})}
	go func() {
		proc.exit = cmd.Wait()
		lw.Close()
		close(proc.done)
	}()
	// EOF once the command runs, or once the init step gave up (it
	// writes why first).
	_ = setupR.SetReadDeadline(time.Now().Add(time.Minute))
	msg, _ := io.ReadAll(setupR)
	setupR.Close()
	if len(msg) > 0 {
		<-proc.done
		return nil, &waitingError{reason: "RunContainerError", err: fmt.Errorf("container %s: %s", c.Name, strings.TrimSpace(string(msg)))}
	}
	return proc, nil
}

// stop ends the process: SIGTERM, then SIGKILL after grace.
func (pr *process) stop(grace time.Duration) {
	select {
	case <-pr.done:
		return
	default:
	}
	_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pr.done:
	case <-time.After(grace):
		_ = pr.cmd.Process.Kill()
		<-pr.done
	}
}

// terminated is the container state after the process ended.
func (pr *process) terminated(started time.Time, logPath string, policy corev1.TerminationMessagePolicy) *corev1.ContainerStateTerminated {
	t := &corev1.ContainerStateTerminated{StartedAt: metav1.NewTime(started), FinishedAt: metav1.Now(), Reason: "Completed"}
	var exitErr *exec.ExitError
	switch {
	case pr.exit == nil:
	case errors.As(pr.exit, &exitErr):
		ws := exitErr.Sys().(syscall.WaitStatus)
		t.Reason = "Error"
		if ws.Signaled() {
			t.ExitCode = 128 + int32(ws.Signal())
			t.Signal = int32(ws.Signal())
		} else {
			t.ExitCode = int32(ws.ExitStatus())
		}
	default:
		t.Reason, t.ExitCode, t.Message = "Error", 128, pr.exit.Error()
	}
	if t.ExitCode != 0 && policy == corev1.TerminationMessageFallbackToLogsOnError {
		// The last lines of output stand for a termination message. (The
		// node has no termination-log file: the File policy gives none.)
		var b strings.Builder
		_ = containerlog.Read(context.Background(), logPath, containerlog.Options{Tail: 5}, &b, func() bool { return false })
		t.Message = strings.TrimSpace(b.String())
	}
	return t
}

// waitingError keeps a container Waiting with a reason.
type waitingError struct {
	reason string
	err    error
}

func (e *waitingError) Error() string { return e.err.Error() }
func (e *waitingError) Unwrap() error { return e.err }

type security struct {
	uid, gid *int64
	groups   []int64
}

// effectiveSecurity merges the pod's and the container's securityContext:
// the container's wins.
func effectiveSecurity(pod *corev1.Pod, c *corev1.Container) security {
	var s security
	if psc := pod.Spec.SecurityContext; psc != nil {
		s.uid, s.gid = psc.RunAsUser, psc.RunAsGroup
		s.groups = psc.SupplementalGroups
		if psc.FSGroup != nil {
			s.groups = append(s.groups, *psc.FSGroup)
		}
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			s.uid = csc.RunAsUser
		}
		if csc.RunAsGroup != nil {
			s.gid = csc.RunAsGroup
		}
	}
	if s.uid != nil && s.gid == nil {
		// A user without a group runs with group 0, as runc does.
		zero := int64(0)
		s.gid = &zero
	}
	return s
}
