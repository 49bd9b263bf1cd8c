package probe

import (
	"context"
	"fmt"
	"github.com/fleetnet/fleetnet/internal/node/expansion"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// execProbe runs an exec probe: the command exits 0 before the timeout.
func execProbe(ctx context.Context, e *corev1.ExecAction, timeout time.Duration, c *corev1.Container, t Target) (Result, string) {
	var env []corev1.EnvVar
	if c != nil {
		env = c.Env
	}
	cmd := expandCommand(e.Command, env)
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, out, err := t.Exec(tctx, cmd)
	if len(out) > maxOutput {
		out = out[:maxOutput]
	}
	// A command that outlives the timeout fails the probe, whatever it
	// returned; one that ended because ctx did is no result at all.
	if tctx.Err() != nil && ctx.Err() == nil {
		return Failure, fmt.Sprintf("command timed out: %q timed out after %v", strings.Join(cmd, " "), timeout)
	}
	if err != nil {
		return Unknown, fmt.Sprintf("running %q: %v", strings.Join(cmd, " "), err)
	}
	if code != 0 {
		if len(out) == 0 {
			return Failure, fmt.Sprintf("command %q exited with code %d", strings.Join(cmd, " "), code)
		}
		// The kubelet's message is the output alone.
		return Failure, string(out)
	}
	return Success, ""
}

// expandCommand replaces $(NAME) in each argument with the value of the
// container's environment variable NAME, as the kubelet does for exec
// probes: only variables with a literal value (no valueFrom; they expand to
// ""), a reference to an unknown name is left as it is, and $$ is a
// literal $.
func expandCommand(cmd []string, env []corev1.EnvVar) []string {
	if len(cmd) == 0 {
		return nil
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(cmd))
	for i, arg := range cmd {
		out[i] = expansion.Expand(arg, vars)
	}
	return out
}
