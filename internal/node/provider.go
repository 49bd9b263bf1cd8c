package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/fleetnet/fleetnet/internal/netns"
	"github.com/fleetnet/fleetnet/internal/node/containerlog"
	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	utilexec "k8s.io/utils/exec"
)

// nodeCapacity is what the node reports: a local fleet shares one machine,
// so these are budgets for the scheduler, not reservations.
var nodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("16"),
	corev1.ResourceMemory:           resource.MustParse("32Gi"),
	corev1.ResourcePods:             resource.MustParse("110"),
	corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
}

// Provider runs the node's pods as processes (virtual-kubelet's provider).
type Provider struct {
	cfg      Config
	log      logr.Logger
	client   kubernetes.Interface
	sources  sources
	services corev1listers.ServiceLister
	recorder record.EventRecorder

	mu       sync.Mutex
	pods     map[string]*pod
	notifyFn func(*corev1.Pod)
}

func newProvider(cfg Config, log logr.Logger, src sources, services corev1listers.ServiceLister) *Provider {
	return &Provider{cfg: cfg, log: log, sources: src, services: services, pods: map[string]*pod{}}
}

func (pr *Provider) event(obj *corev1.Pod, kind, reason, msg string) {
	if pr.recorder != nil {
		pr.recorder.Event(obj, kind, reason, msg)
	}
}

func (pr *Provider) notify(p *corev1.Pod) {
	pr.mu.Lock()
	fn := pr.notifyFn
	pr.mu.Unlock()
	if fn != nil {
		fn(p)
	}
}

// NotifyPods registers the pod controller's status callback.
func (pr *Provider) NotifyPods(_ context.Context, fn func(*corev1.Pod)) {
	pr.mu.Lock()
	pr.notifyFn = fn
	pr.mu.Unlock()
}

// CreatePod starts the pod.
func (pr *Provider) CreatePod(_ context.Context, obj *corev1.Pod) error {
	key := obj.Namespace + "/" + obj.Name
	pr.mu.Lock()
	old, ok := pr.pods[key]
	if ok && old.obj.UID == obj.UID {
		pr.mu.Unlock()
		return nil
	}
	if ok {
		// An earlier incarnation under the same name: it ends on its own.
		delete(pr.pods, key)
		pr.mu.Unlock()
		old.stop()
		pr.mu.Lock()
	}
	p := &pod{
		node:      pr,
		obj:       obj.DeepCopy(),
		dir:       filepath.Join(pr.cfg.StateDir, "pods", fmt.Sprintf("%s_%s_%s", obj.Namespace, obj.Name, obj.UID)),
		done:      make(chan struct{}),
		finished:  make(chan struct{}),
		startedAt: metav1.Now(),
	}
	if obj.Status.StartTime != nil {
		p.startedAt = *obj.Status.StartTime
	}
	for _, c := range obj.Spec.InitContainers {
		run := &containerRun{spec: c}
		if run.sidecar() {
			run.startedCh = make(chan struct{})
		}
		p.inits = append(p.inits, run)
	}
	for _, c := range obj.Spec.Containers {
		p.containers = append(p.containers, &containerRun{spec: c})
	}
	adopt(obj, p.inits, p.containers)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	pr.pods[key] = p
	pr.mu.Unlock()
	pr.log.Info("Starting pod", "pod", key, "uid", obj.UID)
	go p.run(ctx)
	return nil
}

// adopt takes over what the API server says of a pod's containers when the
// node (re)starts a pod it ran before: the processes ended with the node,
// and the restart policy decides what runs again, as a kubelet decides
// after its runtime lost the containers. A container that completed and is
// not to run again keeps its state (init containers that succeeded, and
// containers under Never, or under OnFailure that exited 0); one that was
// running under Never ends with the kubelet's ContainerStatusUnknown.
// One that runs again counts a restart when it had run: restart counts go
// on from what the API server holds.
func adopt(obj *corev1.Pod, inits, containers []*containerRun) {
	statuses := map[string]corev1.ContainerStatus{}
	for _, cs := range append(obj.Status.InitContainerStatuses, obj.Status.ContainerStatuses...) {
		statuses[cs.Name] = cs
	}
	for _, c := range slices.Concat(inits, containers) {
		cs := statuses[c.spec.Name]
		c.restarts = cs.RestartCount
		if cs.State.Running != nil || cs.State.Terminated != nil {
			c.restarts++
		}
	}
	policy := obj.Spec.RestartPolicy
	keep := func(c *containerRun, t *corev1.ContainerStateTerminated) {
		c.finished, c.ran = true, true
		c.state = corev1.ContainerState{Terminated: t}
		c.last = statuses[c.spec.Name].LastTerminationState
		c.restarts = statuses[c.spec.Name].RestartCount
	}
	for _, c := range inits {
		if cs, ok := statuses[c.spec.Name]; ok && !c.sidecar() {
			if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
				keep(c, t)
			}
		}
	}
	for _, c := range containers {
		cs, ok := statuses[c.spec.Name]
		if !ok {
			continue
		}
		switch t := cs.State.Terminated; {
		case t != nil && (policy == corev1.RestartPolicyNever || policy == corev1.RestartPolicyOnFailure && t.ExitCode == 0):
			keep(c, t)
		case cs.State.Running != nil && policy == corev1.RestartPolicyNever:
			keep(c, lost(cs.State.Running))
		}
	}
	// A Pod whose containers all ended is over: its sidecars ended with
	// it and do not start again either (one the node's death caught
	// still running is ended as unknown, as a container under Never).
	if !podCompleted(containers) {
		return
	}
	for _, c := range inits {
		cs, ok := statuses[c.spec.Name]
		if !ok || !c.sidecar() {
			continue
		}
		switch {
		case cs.State.Terminated != nil:
			keep(c, cs.State.Terminated)
		case cs.State.Running != nil:
			keep(c, lost(cs.State.Running))
		}
	}
}

// lost is the state of a container that was running when the node died,
// as the kubelet reports one its runtime no longer knows.
func lost(r *corev1.ContainerStateRunning) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "ContainerStatusUnknown",
		Message:    "The container could not be located when the node restarted",
		StartedAt:  r.StartedAt,
		FinishedAt: metav1.Now(),
	}
}

// podCompleted reports whether every container of a pod ended before the
// node restarted and is not to run again.
func podCompleted(containers []*containerRun) bool {
	for _, c := range containers {
		if !c.finished {
			return false
		}
	}
	return len(containers) > 0
}

// UpdatePod takes what may change of a running pod (labels, annotations,
// the deletion grace period).
func (pr *Provider) UpdatePod(_ context.Context, obj *corev1.Pod) error {
	p := pr.get(obj.Namespace, obj.Name)
	if p == nil || p.obj.UID != obj.UID {
		return errdefs.NotFoundf("pod %s/%s is not on this node", obj.Namespace, obj.Name)
	}
	p.update(func() {
		p.obj.Labels, p.obj.Annotations = obj.Labels, obj.Annotations
		p.obj.DeletionTimestamp, p.obj.DeletionGracePeriodSeconds = obj.DeletionTimestamp, obj.DeletionGracePeriodSeconds
	})
	return nil
}

// DeletePod ends the pod's containers within its grace period and removes
// its network, in the background; the last status says they terminated.
func (pr *Provider) DeletePod(_ context.Context, obj *corev1.Pod) error {
	key := obj.Namespace + "/" + obj.Name
	p := pr.get(obj.Namespace, obj.Name)
	if p == nil || p.obj.UID != obj.UID {
		return errdefs.NotFoundf("pod %s is not on this node", key)
	}
	p.mu.Lock()
	p.obj.DeletionTimestamp, p.obj.DeletionGracePeriodSeconds = obj.DeletionTimestamp, obj.DeletionGracePeriodSeconds
	p.mu.Unlock()
	pr.log.Info("Stopping pod", "pod", key, "uid", obj.UID, "grace", p.grace())
	p.stop()
	go func() {
		<-p.done
		pr.mu.Lock()
		if pr.pods[key] == p {
			delete(pr.pods, key)
		}
		pr.mu.Unlock()
		pr.log.Info("Pod stopped", "pod", key, "uid", obj.UID)
		// As the kubelet does once the containers are gone: the Pod object
		// goes at once rather than when its grace period runs out.
		if pr.client != nil && obj.DeletionTimestamp != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			opts := metav1.NewDeleteOptions(0)
			opts.Preconditions = metav1.NewUIDPreconditions(string(obj.UID))
			err := pr.client.CoreV1().Pods(obj.Namespace).Delete(ctx, obj.Name, *opts)
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				pr.log.Error(err, "Deleting the stopped pod", "pod", key)
			}
		}
	}()
	return nil
}

func (pr *Provider) get(ns, name string) *pod {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.pods[ns+"/"+name]
}

// GetPod returns the pod with its current status.
func (pr *Provider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	p := pr.get(ns, name)
	if p == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", ns, name)
	}
	return p.snapshot(), nil
}

// GetPodStatus returns the pod's current status.
func (pr *Provider) GetPodStatus(ctx context.Context, ns, name string) (*corev1.PodStatus, error) {
	p, err := pr.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &p.Status, nil
}

// GetPods lists the node's pods.
func (pr *Provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	pr.mu.Lock()
	pods := make([]*pod, 0, len(pr.pods))
	for _, p := range pr.pods {
		pods = append(pods, p)
	}
	pr.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.snapshot())
	}
	return out, nil
}

// container returns the pod and the running record of one of its
// containers.
func (pr *Provider) container(ns, name, container string) (*pod, *containerRun, error) {
	p := pr.get(ns, name)
	if p == nil {
		return nil, nil, errdefs.NotFoundf("pod %s/%s is not on this node", ns, name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range slices.Concat(p.containers, p.inits) {
		if c.spec.Name == container {
			return p, c, nil
		}
	}
	return nil, nil, errdefs.NotFoundf("pod %s/%s has no container %q", ns, name, container)
}

// GetContainerLogs reads a container's log, as `kubectl logs` asks.
func (pr *Provider) GetContainerLogs(ctx context.Context, ns, name, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	p, c, err := pr.container(ns, name, container)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	restart := int(c.restarts)
	p.mu.Unlock()
	if opts.Previous {
		if restart == 0 {
			return nil, errdefs.InvalidInputf("previous terminated container %q in pod %q not found", container, name)
		}
		restart--
	}
	path, err := containerlog.Path(filepath.Join(p.dir, "logs"), container, restart)
	if err != nil {
		return nil, err
	}
	running := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !opts.Previous && int(c.restarts) == restart && c.proc != nil
	}
	r, w := io.Pipe()
	go func() {
		err := containerlog.Read(ctx, path, containerlog.Options{
			Tail: opts.Tail, LimitBytes: opts.LimitBytes, Timestamps: opts.Timestamps, Follow: opts.Follow,
			SinceSeconds: opts.SinceSeconds, SinceTime: opts.SinceTime,
		}, w, running)
		w.CloseWithError(err)
	}()
	return r, nil
}

// nsenterArgs enter a running container's namespaces (network, mount, PID,
// UTS) as its user, in its working directory.
func (pr *Provider) nsenterArgs(p *pod, c *containerRun, cmd []string) ([]string, []string, error) {
	p.mu.Lock()
	proc := c.proc
	p.mu.Unlock()
	if proc == nil {
		return nil, nil, errdefs.InvalidInputf("container %s of pod %s is not running", c.spec.Name, p.key())
	}
	args := []string{"--target", strconv.Itoa(proc.cmd.Process.Pid), "--net", "--mount", "--pid", "--uts"}
	sc := effectiveSecurity(p.obj, &c.spec)
	if sc.uid != nil {
		args = append(args, "--setuid", strconv.FormatInt(*sc.uid, 10), "--setgid", strconv.FormatInt(*sc.gid, 10))
	}
	if c.spec.WorkingDir != "" {
		args = append(args, "--wd="+c.spec.WorkingDir)
	}
	env, err := containerEnv(p.snapshot(), &c.spec, pr.sources, pr.services)
	if err != nil {
		return nil, nil, err
	}
	return append(append(args, "--"), cmd...), env, nil
}

// RunInContainer runs cmd in the container's namespaces, as `kubectl exec`
// asks, with a terminal when asked.
func (pr *Provider) RunInContainer(ctx context.Context, ns, name, container string, cmd []string, attach api.AttachIO) error {
	p, c, err := pr.container(ns, name, container)
	if err != nil {
		return err
	}
	args, env, err := pr.nsenterArgs(p, c, cmd)
	if err != nil {
		return err
	}
	x := nsenter(ctx, args, env)
	if attach.TTY() {
		// pty.Start makes it a session leader (its own process group too);
		// setpgid on top of setsid is refused.
		x.SysProcAttr = &syscall.SysProcAttr{}
		f, err := pty.Start(x)
		if err != nil {
			return fmt.Errorf("starting %q with a terminal: %w", cmd, err)
		}
		defer f.Close()
		go func() {
			for size := range attach.Resize() {
				_ = pty.Setsize(f, &pty.Winsize{Rows: size.Height, Cols: size.Width})
			}
		}()
		if in := attach.Stdin(); in != nil {
			go func() { _, _ = io.Copy(f, in) }()
		}
		if out := attach.Stdout(); out != nil {
			_, _ = io.Copy(out, f)
		}
		return exitError(x.Wait())
	}
	if in := attach.Stdin(); in != nil {
		x.Stdin = in
	}
	if out := attach.Stdout(); out != nil {
		x.Stdout = out
	}
	if e := attach.Stderr(); e != nil {
		x.Stderr = e
	}
	return exitError(x.Run())
}

// nsenter returns the command that runs in a container. nsenter forks the
// command into the container's PID namespace, so ending it means ending its
// process group, not nsenter alone; WaitDelay stops waiting for output that
// a leftover child still holds.
func nsenter(ctx context.Context, args, env []string) *exec.Cmd {
	x := exec.CommandContext(ctx, "nsenter", args...)
	x.Env = env
	x.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	x.Cancel = func() error { return syscall.Kill(-x.Process.Pid, syscall.SIGKILL) }
	x.WaitDelay = 2 * time.Second
	return x
}

// exitError turns a command's exit status into the error the kubelet API
// reports as the exit code (kubectl exec exits with it).
func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return utilexec.CodeExitError{Err: err, Code: ee.ExitCode()}
	}
	return err
}

// AttachToContainer is not offered: the node keeps no handle on a
// container's standard input.
func (pr *Provider) AttachToContainer(_ context.Context, ns, name, container string, _ api.AttachIO) error {
	return errdefs.InvalidInputf("attach to %s/%s/%s: the fleetnet process node does not attach to running containers; use kubectl exec or kubectl logs -f", ns, name, container)
}

// PortForward connects stream to port of the pod's network namespace.
func (pr *Provider) PortForward(ctx context.Context, ns, name string, port int32, stream io.ReadWriteCloser) error {
	p := pr.get(ns, name)
	if p == nil {
		return errdefs.NotFoundf("pod %s/%s is not on this node", ns, name)
	}
	defer stream.Close()
	p.mu.Lock()
	netNS := p.net.NetNS
	p.mu.Unlock()
	if netNS == "" {
		return fmt.Errorf("port-forward to %s/%s: the pod has no network yet", ns, name)
	}
	conn, err := netns.Dialer(netNS)(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s port %d: %w", ns, name, port, err)
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// GetStatsSummary reports the node and its pods without usage figures.
func (pr *Provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: pr.cfg.NodeName, StartTime: metav1.Now()}}
	pods, _ := pr.GetPods(context.Background())
	for _, p := range pods {
		s.Pods = append(s.Pods, statsv1alpha1.PodStats{PodRef: statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}})
	}
	return s, nil
}

// GetMetricsResource reports no resource metrics.
func (pr *Provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, nil
}

// probeTarget runs a container's probes in its pod.
type probeTarget struct {
	pod       *pod
	container string
}

func (t *probeTarget) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return netns.Dialer(t.pod.net.NetNS)(ctx, network, address)
}

func (t *probeTarget) Exec(ctx context.Context, cmd []string) (int, []byte, error) {
	pr := t.pod.node
	p, c, err := pr.container(t.pod.obj.Namespace, t.pod.obj.Name, t.container)
	if err != nil {
		return 0, nil, err
	}
	args, env, err := pr.nsenterArgs(p, c, cmd)
	if err != nil {
		return 0, nil, err
	}
	x := nsenter(ctx, args, env)
	out, err := x.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out, nil
	}
	return 0, out, err
}

// forgetStale removes the network of pods an earlier run of the node
// recorded whose Pod no longer exists (or is another incarnation).
func (pr *Provider) forgetStale(ctx context.Context, client kubernetes.Interface) {
	recorded, err := pr.cfg.Networks.Pods(pr.cfg.Cluster)
	if err != nil {
		pr.log.Error(err, "Listing the pods of an earlier run")
		return
	}
	for _, rec := range recorded {
		obj, err := client.CoreV1().Pods(rec.Namespace).Get(ctx, rec.Name, metav1.GetOptions{})
		if err == nil && string(obj.UID) == rec.UID && obj.Spec.NodeName == pr.cfg.NodeName {
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			continue // not known for sure: kept
		}
		pr.log.Info("Removing the network of a pod that is gone", "pod", rec.Namespace+"/"+rec.Name, "uid", rec.UID)
		if err := pr.cfg.Networks.Detach(pr.cfg.Cluster, rec.Namespace, rec.Name, rec.UID); err != nil {
			pr.log.Error(err, "Removing a stale pod's network", "pod", rec.Namespace+"/"+rec.Name)
		}
	}
	pr.forgetStaleFolders(ctx, client)
}

// forgetStaleFolders removes the folders (volumes with Secret data and
// tokens, logs) of pods that are gone; a folder is named
// <namespace>_<name>_<uid>, none of which holds "_".
func (pr *Provider) forgetStaleFolders(ctx context.Context, client kubernetes.Interface) {
	root := filepath.Join(pr.cfg.StateDir, "pods")
	entries, err := os.ReadDir(root)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			pr.log.Error(err, "Listing pod folders", "folder", root)
		}
		return
	}
	for _, e := range entries {
		parts := strings.Split(e.Name(), "_")
		if !e.IsDir() || len(parts) != 3 {
			continue
		}
		ns, name, uid := parts[0], parts[1], parts[2]
		if p := pr.get(ns, name); p != nil && string(p.obj.UID) == uid {
			continue // this run's
		}
		obj, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && string(obj.UID) == uid {
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			continue // not known for sure: kept
		}
		pr.log.Info("Removing the folder of a pod that is gone", "pod", ns+"/"+name, "uid", uid)
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			pr.log.Error(err, "Removing a stale pod's folder", "pod", ns+"/"+name)
		}
	}
}
