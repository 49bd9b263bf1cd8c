package node

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetnet/fleetnet/internal/node/probe"
	corev1 "k8s.io/api/core/v1"
)

// minGrace is the least the kubelet leaves a container between SIGTERM
// and SIGKILL, however long its preStop hook took or the containers
// stopped before it (a sidecar's turn) waited.
const minGrace = 2 * time.Second

// runHook runs a container's lifecycle handler (postStart or preStop) as
// the kubelet does: exec in the container, an HTTP GET to the pod, or a
// sleep; within timeout. A TCPSocket handler is accepted and does nothing,
// as in the kubelet (deprecated).
func (p *pod) runHook(ctx context.Context, c *containerRun, h *corev1.LifecycleHandler, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var handler corev1.ProbeHandler
	switch {
	case h.Exec != nil:
		handler.Exec = h.Exec
	case h.HTTPGet != nil:
		handler.HTTPGet = h.HTTPGet
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
		return nil
	default:
		return nil
	}
	pr := &corev1.Probe{ProbeHandler: handler, TimeoutSeconds: int32(max(1, timeout/time.Second))}
	if ok, msg := probe.Do(ctx, pr, p.net.Address, &c.spec, &probeTarget{pod: p, container: c.spec.Name}); !ok {
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// preStop runs the container's preStop hook, if it has one, within the
// grace period, and returns what is left of it for SIGTERM to SIGKILL.
func (p *pod) preStop(c *containerRun, grace time.Duration) time.Duration {
	lc := c.spec.Lifecycle
	if lc == nil || lc.PreStop == nil {
		return grace
	}
	start := time.Now()
	if err := p.runHook(context.Background(), c, lc.PreStop, grace); err != nil {
		p.node.log.Info("PreStop hook failed", "pod", p.key(), "container", c.spec.Name, "cause", err.Error())
		p.node.event(p.obj, corev1.EventTypeWarning, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed for container %s: %v", c.spec.Name, err))
	}
	return max(grace-time.Since(start), minGrace)
}
