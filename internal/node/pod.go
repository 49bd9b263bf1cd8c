package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/internal/node/containerlog"
	"github.com/fleetnet/fleetnet/internal/node/probe"
	"github.com/fleetnet/fleetnet/internal/podnet"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// pod is one pod the node runs: its network, volumes and containers. Its
// lifecycle runs in its own goroutine (run); the provider reads its status.
type pod struct {
	node *Provider
	dir  string

	mu      sync.Mutex
	obj     *corev1.Pod
	net     podnet.Pod
	volumes map[string]string
	// netErr keeps every container ContainerCreating with the cause.
	netErr     error
	initDone   bool
	inits      []*containerRun
	containers []*containerRun
	startedAt  metav1.Time

	cancel context.CancelFunc
	// finished closes when run returned: no container process is left.
	finished chan struct{}
	// stopping is set once the pod is being deleted, at stopStarted; done
	// closes when every container ended and the network is gone.
	stopping    bool
	stopStarted time.Time
	done        chan struct{}

	// seq numbers status snapshots (under mu); notified is the last one
	// handed to the pod controller (under notifyMu), which never gets an
	// older status after a newer one when updates race.
	seq      uint64
	notifyMu sync.Mutex
	notified uint64
}

// containerRun is the node's record of one container.
type containerRun struct {
	spec corev1.Container
	// restarts counts the container's restarts; it also numbers the log
	// file of its current (or last) run.
	restarts int32
	// ran is set once the node started the container.
	ran     bool
	state   corev1.ContainerState
	last    corev1.ContainerState
	ready   bool
	started bool
	proc    *process
	// kill asks the current process to end (a failed liveness probe).
	kill chan struct{}
	// startedCh, for a sidecar, closes when it first counts as started
	// (postStart done, startup probe passed): the next init container
	// waits for that, as the kubelet's does.
	startedCh chan struct{}
	// finished marks a container whose run ended before the node
	// restarted and that its restart policy does not run again: it keeps
	// the state the API server holds.
	finished bool
}

// sidecar says whether an init container is a sidecar (KEP-753: restart
// policy Always): it starts in init order, then runs beside the
// containers, restarted whenever it ends, and stops after them.
func (c *containerRun) sidecar() bool {
	return c.spec.RestartPolicy != nil && *c.spec.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func (p *pod) key() string { return p.obj.Namespace + "/" + p.obj.Name }

// run brings the pod up and keeps its containers running until ctx ends.
func (p *pod) run(ctx context.Context) {
	defer close(p.finished)
	log := p.node.log.WithValues("pod", p.key())
	defer func() {
		// A Pod that finished on its own (its restart policy let every
		// container end) gives its address back at once, as a kubelet
		// releases a finished Pod's sandbox; its status keeps the address.
		if ctx.Err() != nil {
			return // being stopped: stop() releases the network
		}
		if err := p.node.cfg.Networks.Detach(p.node.cfg.Cluster, p.obj.Namespace, p.obj.Name, string(p.obj.UID)); err != nil {
			log.Error(err, "Releasing the network of a finished pod")
			return
		}
		log.Info("Pod finished; its network is released")
	}()
	if podCompleted(p.containers) {
		// It ended before the node restarted (adopt): nothing runs
		// again, sidecars included, and it needs no network.
		p.update(func() { p.initDone = true })
		log.Info("Pod had finished before the node restarted; nothing to start")
		return
	}
	net, err := p.node.cfg.Networks.Attach(p.node.cfg.Cluster, p.obj.Namespace, p.obj.Name, string(p.obj.UID))
	for err != nil {
		log.Error(err, "Pod network")
		p.update(func() { p.netErr = err })
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		net, err = p.node.cfg.Networks.Attach(p.node.cfg.Cluster, p.obj.Namespace, p.obj.Name, string(p.obj.UID))
	}
	p.update(func() {
		p.net, p.netErr = net, nil
		p.obj.Status.PodIP = net.Address
		p.obj.Status.PodIPs = nil
		for _, a := range net.Addresses() {
			p.obj.Status.PodIPs = append(p.obj.Status.PodIPs, corev1.PodIP{IP: a})
		}
		p.obj.Status.HostIP = p.node.cfg.InternalIP
		p.obj.Status.HostIPs = []corev1.HostIP{{IP: p.node.cfg.InternalIP}}
	})
	log.Info("Pod network ready", "addresses", net.Addresses(), "netns", net.NetNS)
	for lastCause := ""; ; {
		vols, err := p.prepare()
		if err == nil {
			p.update(func() { p.volumes, p.netErr = vols, nil })
			break
		}
		// Said once per cause, not at every retry.
		if cause := err.Error(); cause != lastCause {
			lastCause = cause
			log.Info("Waiting for the pod's volumes", "cause", cause)
			p.node.event(p.obj, corev1.EventTypeWarning, "FailedMount", cause)
		}
		p.update(func() { p.netErr = err })
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
	// Sidecars run under contexts of their own: they stop after the
	// containers, in reverse order.
	var sidecars []func()
	defer func() {
		for _, stop := range slices.Backward(sidecars) {
			stop()
		}
	}()
	for _, c := range p.inits {
		if c.sidecar() {
			sctx, cancel := context.WithCancel(context.Background())
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				// Restarted whenever it ends, whatever the pod's policy;
				// its runs close startedCh (markStartedLocked).
				p.supervise(sctx, c, corev1.RestartPolicyAlways)
			}()
			sidecars = append(sidecars, func() { cancel(); <-ended })
			select {
			case <-c.startedCh:
				continue
			case <-ctx.Done():
				return
			}
		}
		if c.finished {
			continue // completed before the node restarted
		}
		if !p.runInit(ctx, c) {
			return
		}
	}
	p.update(func() { p.initDone = true })
	var wg sync.WaitGroup
	for _, c := range p.containers {
		if c.finished {
			continue
		}
		wg.Go(func() { p.supervise(ctx, c, p.obj.Spec.RestartPolicy) })
	}
	wg.Wait()
}

// markStartedLocked records that the container counts as started, and lets
// the init sequence go on past a sidecar. Called with p.mu held.
func (c *containerRun) markStartedLocked() {
	c.started = true
	if c.startedCh != nil {
		select {
		case <-c.startedCh:
		default:
			close(c.startedCh)
		}
	}
}

// prepare writes the pod's hosts file and volumes.
func (p *pod) prepare() (map[string]string, error) {
	p.mu.Lock()
	obj := p.obj.DeepCopy()
	p.mu.Unlock()
	hostname := podHostname(obj)
	fqdn := hostname
	if obj.Spec.Subdomain != "" {
		fqdn = fmt.Sprintf("%s.%s.%s.svc.cluster.local %s", hostname, obj.Spec.Subdomain, obj.Namespace, hostname)
	}
	hosts := "# Kubernetes-managed hosts file (fleetnet process node).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	// A line per address, as the kubelet writes.
	for _, ip := range obj.Status.PodIPs {
		hosts += fmt.Sprintf("%s\t%s\n", ip.IP, fqdn)
	}
	for _, a := range obj.Spec.HostAliases {
		hosts += fmt.Sprintf("%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	if err := writeFile(filepath.Join(p.dir, "hosts"), []byte(hosts), 0o644); err != nil {
		return nil, err
	}
	return writeVolumes(obj, p.dir, p.node.sources)
}

// runInit runs an init container to success, as often as the restart
// policy allows; false means the pod cannot go on (failed, or ctx ended).
func (p *pod) runInit(ctx context.Context, c *containerRun) bool {
	backoff := newBackoff(p.node.cfg.RestartBackoff)
	for {
		code, ok := p.runOnce(ctx, c, nil)
		if ctx.Err() != nil {
			return false
		}
		if ok && code == 0 {
			return true
		}
		// One that could not start (a missing ConfigMap, say) is tried
		// again whatever the policy, as the kubelet does.
		if ok && p.obj.Spec.RestartPolicy == corev1.RestartPolicyNever {
			return false
		}
		if !p.wait(ctx, c, backoff.next()) {
			return false
		}
	}
}

// supervise keeps a container running as its restart policy says.
func (p *pod) supervise(ctx context.Context, c *containerRun, policy corev1.RestartPolicy) {
	backoff := newBackoff(p.node.cfg.RestartBackoff)
	for {
		began := time.Now()
		code, ok := p.runOnce(ctx, c, p.probes)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > 10*time.Minute {
			backoff.reset()
		}
		switch policy {
		case corev1.RestartPolicyNever:
			if ok {
				return
			}
		case corev1.RestartPolicyOnFailure:
			if ok && code == 0 {
				return
			}
		}
		if !p.wait(ctx, c, backoff.next()) {
			return
		}
	}
}

// wait keeps the container Waiting in back-off for d.
func (p *pod) wait(ctx context.Context, c *containerRun, d time.Duration) bool {
	p.update(func() {
		if c.state.Terminated != nil {
			c.last = c.state
			c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason:  "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", d.Round(time.Second), c.spec.Name, p.obj.Name, p.obj.Namespace, p.obj.UID),
			}}
		}
	})
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// runOnce starts the container and waits for its end. ok is false when it
// could not start (the state says why); code is its exit code.
func (p *pod) runOnce(ctx context.Context, c *containerRun, probes func(context.Context, *containerRun)) (code int32, ok bool) {
	if ctx.Err() != nil {
		return 0, false
	}
	p.mu.Lock()
	if c.ran {
		c.restarts++
	}
	c.ran = true
	p.mu.Unlock()
	proc, err := p.start(&c.spec, int(c.restarts))
	if err != nil {
		reason := "CreateContainerError"
		var we *waitingError
		if errors.As(err, &we) {
			reason = we.reason
		}
		p.node.log.Info("Container cannot start", "pod", p.key(), "container", c.spec.Name, "reason", reason, "cause", err.Error())
		p.node.event(p.obj, corev1.EventTypeWarning, "Failed", fmt.Sprintf("container %s: %s", c.spec.Name, err))
		if reason == "RunContainerError" {
			// Its command could not run: a run that ended with 128, which
			// the restart policy judges, as the kubelet's StartError.
			now := metav1.Now()
			p.update(func() {
				c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: now, FinishedAt: now,
				}}
			})
			return 128, true
		}
		p.update(func() {
			c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}}
		})
		return 0, false
	}
	started := time.Now()
	p.update(func() {
		c.proc = proc
		c.kill = make(chan struct{}, 1)
		c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
		c.started = false
		c.ready = false
	})
	p.node.event(p.obj, corev1.EventTypeNormal, "Started", "Started container "+c.spec.Name)
	hookFailed := false
	if lc := c.spec.Lifecycle; lc != nil && lc.PostStart != nil {
		// As the kubelet: the hook runs once the container started; its
		// failure kills the container, whose restart policy then decides.
		if err := p.runHook(ctx, c, lc.PostStart, p.grace()); err != nil {
			p.node.log.Info("PostStart hook failed", "pod", p.key(), "container", c.spec.Name, "cause", err.Error())
			p.node.event(p.obj, corev1.EventTypeWarning, "FailedPostStartHook", fmt.Sprintf("PostStartHook failed for container %s: %v", c.spec.Name, err))
			proc.stop(p.grace())
			hookFailed = true
		}
	}
	if c.spec.StartupProbe == nil && !hookFailed {
		// Started once postStart ran, as the kubelet counts it.
		p.update(func() {
			c.markStartedLocked()
			c.ready = c.spec.ReadinessProbe == nil
		})
	}
	probeCtx, stopProbes := context.WithCancel(ctx)
	if probes != nil {
		go probes(probeCtx, c)
	}
	select {
	case <-proc.done:
	case <-c.kill:
		proc.stop(p.preStop(c, p.grace()))
	case <-ctx.Done():
		proc.stop(p.preStop(c, p.stopGrace()))
	}
	stopProbes()
	logPath, _ := containerlog.Path(filepath.Join(p.dir, "logs"), c.spec.Name, int(c.restarts))
	t := proc.terminated(started, logPath, c.spec.TerminationMessagePolicy)
	p.update(func() {
		c.proc = nil
		c.ready = false
		c.state = corev1.ContainerState{Terminated: t}
	})
	return t.ExitCode, true
}

// probes runs the container's probes until ctx ends: startup first, then
// readiness and liveness.
func (p *pod) probes(ctx context.Context, c *containerRun) {
	target := &probeTarget{pod: p, container: c.spec.Name}
	ip := p.net.Address
	if sp := c.spec.StartupProbe; sp != nil {
		passed := make(chan struct{})
		w := probe.NewWorker(probe.Startup, sp, ip, &c.spec, target, func(r probe.Result, msg string) {
			switch r {
			case probe.Success:
				p.update(func() { c.markStartedLocked(); c.ready = c.spec.ReadinessProbe == nil })
				select {
				case <-passed:
				default:
					close(passed)
				}
			case probe.Failure:
				p.node.event(p.obj, corev1.EventTypeWarning, "Unhealthy", "Startup probe failed: "+msg)
				p.restartContainer(c)
			}
		})
		sctx, stop := context.WithCancel(ctx)
		go w.Run(sctx)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-passed:
			stop()
		}
	}
	if rp := c.spec.ReadinessProbe; rp != nil {
		w := probe.NewWorker(probe.Readiness, rp, ip, &c.spec, target, func(r probe.Result, msg string) {
			if r == probe.Failure && msg != "" {
				p.node.event(p.obj, corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed: "+msg)
			}
			p.update(func() { c.ready = r == probe.Success })
		})
		go w.Run(ctx)
	}
	if lp := c.spec.LivenessProbe; lp != nil {
		w := probe.NewWorker(probe.Liveness, lp, ip, &c.spec, target, func(r probe.Result, msg string) {
			if r == probe.Failure {
				p.node.event(p.obj, corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed: "+msg)
				p.node.log.Info("Liveness probe failed; restarting the container", "pod", p.key(), "container", c.spec.Name, "cause", msg)
				p.restartContainer(c)
			}
		})
		go w.Run(ctx)
	}
	<-ctx.Done()
}

func (p *pod) restartContainer(c *containerRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.kill != nil {
		select {
		case c.kill <- struct{}{}:
		default:
		}
	}
}

// grace is how long containers get between SIGTERM and SIGKILL.
func (p *pod) grace() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g := p.obj.DeletionGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	if g := p.obj.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

// stopGrace is the grace a container gets when the pod's containers are
// stopped: while the pod is being deleted, what is left of its grace
// period since the deletion began, at least minGrace, as the kubelet
// counts it for sidecars stopped after the containers; otherwise the whole
// grace period.
func (p *pod) stopGrace() time.Duration {
	grace := p.grace()
	p.mu.Lock()
	started := p.stopStarted
	p.mu.Unlock()
	if started.IsZero() {
		return grace
	}
	return max(grace-time.Since(started), minGrace)
}

// update changes the pod's record under its lock and tells the pod
// controller the new status.
func (p *pod) update(change func()) {
	p.mu.Lock()
	change()
	p.seq++
	seq, out := p.seq, p.snapshotLocked()
	p.mu.Unlock()
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	if seq < p.notified {
		return // a newer status went out meanwhile
	}
	p.notified = seq
	p.node.notify(out)
}

// snapshot is the pod with its current status.
func (p *pod) snapshot() *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshotLocked()
}

func (p *pod) snapshotLocked() *corev1.Pod {
	out := p.obj.DeepCopy()
	st := &out.Status
	now := metav1.Now()
	st.StartTime = &p.startedAt
	st.InitContainerStatuses = nil
	st.ContainerStatuses = nil
	for _, c := range p.inits {
		st.InitContainerStatuses = append(st.InitContainerStatuses, p.containerStatus(c))
	}
	allReady, allStarted := true, true
	running, succeeded, failed, terminated := 0, 0, 0, 0
	for _, c := range p.containers {
		cs := p.containerStatus(c)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		allReady = allReady && c.ready
		switch {
		case c.state.Running != nil:
			running++
		case c.state.Terminated != nil:
			terminated++
			if c.state.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		}
		allStarted = allStarted && (c.state.Running != nil || c.restarts > 0 || c.state.Terminated != nil)
	}
	policy := p.obj.Spec.RestartPolicy
	// A Pod is done once its sidecars ended too: virtual-kubelet writes no
	// status after a terminal phase, which would leave them Running.
	sidecarsRunning := false
	for _, c := range p.inits {
		sidecarsRunning = sidecarsRunning || c.sidecar() && c.state.Running != nil
	}
	switch {
	case sidecarsRunning && terminated == len(p.containers):
		st.Phase = corev1.PodRunning
	case p.stopping && terminated == len(p.containers):
		st.Phase = corev1.PodSucceeded
		if failed > 0 {
			st.Phase = corev1.PodFailed
		}
	case policy != corev1.RestartPolicyAlways && terminated == len(p.containers) && (failed == 0 || policy == corev1.RestartPolicyNever):
		st.Phase = corev1.PodSucceeded
		if failed > 0 {
			st.Phase = corev1.PodFailed
		}
	case policy == corev1.RestartPolicyNever && p.initFailedLocked() && !sidecarsRunning:
		st.Phase = corev1.PodFailed
	case p.initDone && allStarted && (running > 0 || terminated > 0):
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	for _, c := range p.inits {
		if c.sidecar() {
			allReady = allReady && c.ready
		}
	}
	ready := allReady && p.initDone && running == len(p.containers)
	cond := func(t corev1.PodConditionType, ok bool, reason string) {
		status := corev1.ConditionFalse
		if ok {
			status, reason = corev1.ConditionTrue, ""
		}
		for i := range st.Conditions {
			if st.Conditions[i].Type == t {
				if st.Conditions[i].Status != status {
					st.Conditions[i].LastTransitionTime = now
				}
				st.Conditions[i].Status, st.Conditions[i].Reason = status, reason
				return
			}
		}
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: now})
	}
	cond(corev1.PodReadyToStartContainers, p.net.Address != "", "")
	cond(corev1.PodInitialized, p.initDone, "ContainersNotInitialized")
	cond(corev1.ContainersReady, ready, "ContainersNotReady")
	cond(corev1.PodReady, ready, "ContainersNotReady")
	cond(corev1.PodScheduled, true, "")
	// Kept, so that a transition time moves only when its status does.
	p.obj.Status.Conditions = st.Conditions
	return out
}

func (p *pod) initFailedLocked() bool {
	for _, c := range p.inits {
		if t := c.state.Terminated; t != nil && t.ExitCode != 0 && !c.sidecar() {
			return true
		}
	}
	return false
}

func (p *pod) containerStatus(c *containerRun) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{
		Name:                 c.spec.Name,
		Image:                c.spec.Image,
		ImageID:              "fleetnet-process-node://" + repository(c.spec.Image),
		ContainerID:          fmt.Sprintf("process://%s/%s/%d", p.obj.UID, c.spec.Name, c.restarts),
		RestartCount:         c.restarts,
		Ready:                c.ready,
		Started:              ptr.To(c.started),
		State:                c.state,
		LastTerminationState: c.last,
	}
	if c.state.Waiting == nil && c.state.Running == nil && c.state.Terminated == nil {
		reason, msg := "ContainerCreating", ""
		if p.netErr != nil {
			msg = p.netErr.Error()
		}
		if !p.initDone && len(p.inits) > 0 {
			reason = "PodInitializing"
		}
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	return cs
}

// stop ends the pod's containers within their grace period, then removes
// its network; done closes when that is finished.
func (p *pod) stop() {
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return
	}
	p.stopping, p.stopStarted = true, time.Now()
	cancel := p.cancel
	p.mu.Unlock()
	go func() {
		cancel()
		<-p.finished
		if err := p.node.cfg.Networks.Detach(p.node.cfg.Cluster, p.obj.Namespace, p.obj.Name, string(p.obj.UID)); err != nil {
			p.node.log.Error(err, "Removing the pod's network", "pod", p.key())
		}
		if err := os.RemoveAll(p.dir); err != nil {
			p.node.log.Error(err, "Removing the pod's folder", "pod", p.key())
		}
		p.update(func() {
			for _, c := range slices.Concat(p.inits, p.containers) {
				if c.state.Terminated == nil {
					c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: metav1.Now()}}
				}
				c.ready = false
			}
		})
		close(p.done)
	}()
}

// backoff is the kubelet's restart back-off: doubling from base up to five
// minutes.
type backoff struct {
	base, cur time.Duration
}

func newBackoff(base time.Duration) *backoff { return &backoff{base: base} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.base
	} else {
		b.cur = min(2*b.cur, 5*time.Minute)
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }
