// Package probe runs Kubernetes container probes (readiness, liveness and
// startup) for the process node, a virtual kubelet whose pod containers are
// local processes, each pod in its own network namespace.
//
// It follows the kubelet (k8s.io/kubernetes pkg/probe and pkg/kubelet/prober):
// the same handlers, defaults, thresholds and, mostly, messages. The
// differences are written where they are made. Connections are opened and
// commands run through a Target that the caller supplies, so that a probe
// reaches the pod from inside the pod's own network namespace, as the pod's
// processes would.
package probe

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Target is where probes run: a pod's network namespace and one of its
// containers.
type Target interface {
	// DialContext opens a connection from inside the pod's network
	// namespace, resolving names there. The HTTP probe's failure message
	// carries the start of the response body; that is safe only because the
	// connection comes from the pod's namespace, so the probe reads nothing
	// the pod could not read itself. (The kubelet dials from the host and
	// leaves the body out for that reason, kubernetes#99425.)
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
	// Exec runs cmd in the container and returns its exit code and its
	// combined standard output and error. The error is for a command that
	// could not be run or did not finish before ctx ended, not for a
	// non-zero exit code.
	Exec(ctx context.Context, cmd []string) (exitCode int, output []byte, err error)
}

// Result is the state a probe gives a container.
type Result int

const (
	// Unknown is no verdict: a startup probe before its thresholds are
	// reached, or an attempt that could not be run at all (a port name the
	// container does not declare, a probe without a handler, a command
	// that could not start).
	Unknown Result = iota
	// Success is a passing probe.
	Success
	// Failure is a failing probe.
	Failure
)

// String returns the kubelet's name for r.
func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	default:
		return "Unknown"
	}
}

// Kubelet defaults for a probe's zero fields (the API server's defaulting of
// corev1.Probe).
const (
	defaultTimeoutSeconds   = 1
	defaultPeriodSeconds    = 10
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// maxOutput is how much of a response body or command output is read, as
// the kubelet does (10 KiB).
const maxOutput = 10 << 10

// Do runs one attempt of probe p against container c of the pod at podIP, as
// the kubelet does, and says whether it passed and, when it did not, why.
// p.TimeoutSeconds (1 when zero) bounds the attempt.
//
// A nil probe passes, as in the kubelet. A probe that cannot be run (a port
// name c does not declare, no handler, a command Target.Exec could not run)
// does not pass and the message says why; a Worker, like the kubelet, counts
// such an attempt toward neither threshold.
//
// A redirect to another host is not followed and passes with a warning in
// the message, as in the kubelet.
func Do(ctx context.Context, p *corev1.Probe, podIP string, c *corev1.Container, t Target) (ok bool, message string) {
	timeout := time.Duration(defaultTimeoutSeconds) * time.Second
	if p != nil && p.TimeoutSeconds > 0 {
		timeout = time.Duration(p.TimeoutSeconds) * time.Second
	}
	r, msg := attempt(ctx, p, timeout, podIP, c, t)
	return r == Success, msg
}

// attempt runs one probe attempt bounded by timeout. Unknown means the probe
// could not be run; the kubelet throws such attempts away.
func attempt(ctx context.Context, p *corev1.Probe, timeout time.Duration, podIP string, c *corev1.Container, t Target) (Result, string) {
	if p == nil {
		return Success, ""
	}
	// The kubelet's order, which matters only for a probe that validation
	// would have refused for having several handlers.
	switch {
	case p.Exec != nil:
		return execProbe(ctx, p.Exec, timeout, c, t)
	case p.HTTPGet != nil:
		return httpProbe(ctx, p.HTTPGet, timeout, podIP, c, t)
	case p.TCPSocket != nil:
		return tcpProbe(ctx, p.TCPSocket, timeout, podIP, c, t)
	case p.GRPC != nil:
		return grpcProbe(ctx, p.GRPC, timeout, podIP, t)
	default:
		return Unknown, "missing probe handler"
	}
}

// resolvePort turns a probe's port, a number or the name of one of c's
// ports, into a port number.
func resolvePort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	n := -1
	switch port.Type {
	case intstr.Int:
		n = port.IntValue()
	case intstr.String:
		var found bool
		if c != nil {
			for _, p := range c.Ports {
				if p.Name == port.StrVal {
					n, found = int(p.ContainerPort), true
					break
				}
			}
		}
		if !found {
			return 0, fmt.Errorf("port %q not found", port.StrVal)
		}
	}
	if n <= 0 || n > 65535 {
		return 0, fmt.Errorf("invalid port number: %d", n)
	}
	return n, nil
}
