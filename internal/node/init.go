package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A container is started by the node as a copy of its own binary in new
// mount, PID and UTS namespaces (InitCommand), which joins the pod's network
// namespace, mounts what the container sees, takes the container's user and
// then replaces itself with the container's command: the command is PID 1 of
// its PID namespace, as in a container runtime, and the kernel ends every
// process it started when it exits.

// InitSpec is what the init step needs; the node writes it as JSON.
type InitSpec struct {
	// NetNS is the path of the pod's network namespace.
	NetNS    string `json:"netns"`
	Hostname string `json:"hostname"`
	// Mounts are bind mounts, in order: the pod's resolv.conf and hosts
	// file, then its volumes.
	Mounts []Mount `json:"mounts,omitempty"`
	// Scratch holds the upper layers of directories that gain mount points
	// (a volume at /etc/secret-volume makes an overlay of /etc).
	Scratch string   `json:"scratch"`
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir,omitempty"`
	UID     *int64   `json:"uid,omitempty"`
	GID     *int64   `json:"gid,omitempty"`
	Groups  []int64  `json:"groups,omitempty"`
}

// Mount is a bind mount of a host path at a path of the container.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// setupFD is the init step's end of the set-up pipe (ExtraFiles[0]).
const setupFD = 3

// InitCloneFlags are the namespaces a container gets besides the pod's
// network namespace.
const InitCloneFlags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS

// RunInit is the init step, run in the child: it reads the spec at path and
// execs the container's command. It returns only on failure; the caller
// prints the error (the container's log shows it) and exits non-zero.
func RunInit(path string) (err error) {
	// fd 3 tells the node how set-up ended: closed by a successful exec
	// (close-on-exec), or the error written to it.
	setup := os.NewFile(setupFD, "setup")
	defer func() {
		if err != nil && setup != nil {
			fmt.Fprintln(setup, err)
		}
	}()
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the container's spec: %w", err)
	}
	var spec InitSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("reading the container's spec %s: %w", path, err)
	}
	// Setns changes the calling thread only; exec keeps that thread.
	runtime.LockOSThread()
	fd, err := unix.Open(spec.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the pod's network namespace %s: %w", spec.NetNS, err)
	}
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering the pod's network namespace %s: %w", spec.NetNS, err)
	}
	unix.Close(fd)
	// Mounts made from here on stay in this mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc of the PID namespace: %w", err)
	}
	// /sys shows the network namespace it was mounted in: the pod's.
	if err := unix.Unmount("/sys", unix.MNT_DETACH); err == nil {
		_ = unix.Mount("sysfs", "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	// Mount points first, binds after: an overlay made to hold a mount
	// point (of /etc, say) would hide binds made before it below it (the
	// Pod's /etc/resolv.conf).
	overlays := map[string]bool{}
	for i, m := range spec.Mounts {
		if err := ensureMountPoint(m, filepath.Join(spec.Scratch, strconv.Itoa(i)), overlays); err != nil {
			return err
		}
	}
	if spec.Dir != "" {
		if _, err := os.Stat(spec.Dir); errors.Is(err, os.ErrNotExist) {
			if err := makeInOverlay(spec.Dir, true, filepath.Join(spec.Scratch, "workdir"), overlays); err != nil {
				return fmt.Errorf("workingDir %s: %w", spec.Dir, err)
			}
		}
	}
	for _, m := range spec.Mounts {
		if err := bindMount(m); err != nil {
			return err
		}
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fmt.Errorf("setting the hostname %q: %w", spec.Hostname, err)
		}
	}
	if spec.GID != nil || len(spec.Groups) > 0 {
		groups := make([]int, 0, len(spec.Groups))
		for _, g := range spec.Groups {
			groups = append(groups, int(g))
		}
		if err := syscall.Setgroups(groups); err != nil {
			return fmt.Errorf("setting supplemental groups %v: %w", spec.Groups, err)
		}
	}
	if spec.GID != nil {
		if err := syscall.Setgid(int(*spec.GID)); err != nil {
			return fmt.Errorf("runAsGroup %d: %w", *spec.GID, err)
		}
	}
	if spec.UID != nil {
		if err := syscall.Setuid(int(*spec.UID)); err != nil {
			return fmt.Errorf("runAsUser %d: %w", *spec.UID, err)
		}
	}
	// A changed user clears the parent-death signal; the node's death
	// must still end the container.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	// A runtime starts a container in / unless it names a workingDir.
	dir := "/"
	if spec.Dir != "" {
		dir = spec.Dir
	}
	if err := os.Chdir(dir); err != nil {
		return fmt.Errorf("workingDir %s: %w", dir, err)
	}
	bin, err := lookPath(spec.Argv[0], spec.Env)
	if err != nil {
		return err
	}
	if setup != nil {
		unix.CloseOnExec(setupFD)
	}
	err = syscall.Exec(bin, spec.Argv, spec.Env)
	return fmt.Errorf("starting %s: %w", spec.Argv[0], err)
}

// ensureMountPoint makes m's target exist. A target that does not is made
// in an overlay of its nearest existing folder, so that the host's file
// system is not touched; directly under / it is made on the host (an empty
// folder or file).
func ensureMountPoint(m Mount, scratch string, overlays map[string]bool) error {
	src, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("mount %s: %w", m.Target, err)
	}
	if _, err := os.Lstat(m.Target); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := makeInOverlay(m.Target, src.IsDir(), scratch, overlays); err != nil {
		return fmt.Errorf("mount %s: %w", m.Target, err)
	}
	return nil
}

// makeInOverlay makes path (a folder, or an empty file) in an overlay of
// its nearest existing parent.
func makeInOverlay(path string, dir bool, scratch string, overlays map[string]bool) error {
	parent := filepath.Dir(path)
	for {
		if _, err := os.Stat(parent); err == nil {
			break
		}
		parent = filepath.Dir(parent)
	}
	if parent != "/" && !overlays[parent] {
		upper, work := filepath.Join(scratch, "upper"), filepath.Join(scratch, "work")
		if err := os.MkdirAll(upper, 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", parent, upper, work)
		if err := unix.Mount("overlay", parent, "overlay", 0, opts); err != nil {
			return fmt.Errorf("an overlay of %s to hold it: %w", parent, err)
		}
		overlays[parent] = true
	}
	if dir {
		return os.MkdirAll(path, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, nil, 0o644)
}

// bindMount bind-mounts m, read-only when asked.
func bindMount(m Mount) error {
	if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("mount %s at %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mount %s read-only: %w", m.Target, err)
		}
	}
	return nil
}

// lookPath finds name on the container's PATH (its environment's, not the
// node's).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in $PATH (%s)", name, path)
}
