package node

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestAdopt(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	at := metav1.Unix(1000, 0)
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}
	exited := func(code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: at}}
	}
	tests := []struct {
		name   string
		policy corev1.RestartPolicy
		init   *corev1.ContainerState // the init container "setup" (nil: none)
		side   *corev1.ContainerState // the sidecar "proxy" (nil: none)
		main   corev1.ContainerState
		// kept: the containers that keep their state and do not run
		// again; code is main's exit code when kept.
		kept []string
		code int32
	}{
		{name: "always restarts everything but a completed init", policy: corev1.RestartPolicyAlways, init: ptr.To(exited(0)), main: exited(0), kept: []string{"setup"}, code: 0},
		{name: "a failed init runs again", policy: corev1.RestartPolicyOnFailure, init: ptr.To(exited(1)), main: corev1.ContainerState{}},
		{name: "on failure keeps a success", policy: corev1.RestartPolicyOnFailure, main: exited(0), kept: []string{"main"}},
		{name: "on failure restarts a failure", policy: corev1.RestartPolicyOnFailure, main: exited(2)},
		{name: "on failure restarts a running one", policy: corev1.RestartPolicyOnFailure, main: running},
		{name: "never keeps a failure", policy: corev1.RestartPolicyNever, main: exited(2), kept: []string{"main"}, code: 2},
		{name: "never ends a running one as unknown", policy: corev1.RestartPolicyNever, main: running, kept: []string{"main"}, code: 137},
		{name: "never: main lost, so the pod ended, its sidecar too", policy: corev1.RestartPolicyNever, side: ptr.To(exited(0)), main: running, kept: []string{"proxy", "main"}, code: 137},
		{name: "not started yet", policy: corev1.RestartPolicyNever, main: corev1.ContainerState{}},
		{name: "a completed pod's sidecar stays ended", policy: corev1.RestartPolicyNever, side: ptr.To(exited(0)), main: exited(0), kept: []string{"proxy", "main"}, code: 0},
		{name: "a completed pod's sidecar caught running ends as unknown", policy: corev1.RestartPolicyOnFailure, side: &running, main: exited(0), kept: []string{"proxy", "main"}, code: 0},
		{name: "a sidecar runs again while main does", policy: corev1.RestartPolicyOnFailure, side: ptr.To(exited(0)), main: exited(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: tc.policy}}
			var inits []*containerRun
			if tc.init != nil {
				pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "setup", State: *tc.init})
				inits = append(inits, &containerRun{spec: corev1.Container{Name: "setup"}})
			}
			if tc.side != nil {
				pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "proxy", State: *tc.side, RestartCount: 4})
				inits = append(inits, &containerRun{spec: corev1.Container{Name: "proxy", RestartPolicy: &always}})
			}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: tc.main, RestartCount: 3}}
			main := &containerRun{spec: corev1.Container{Name: "main"}}
			adopt(pod, inits, []*containerRun{main})
			kept := map[string]bool{}
			for _, name := range tc.kept {
				kept[name] = true
			}
			for _, c := range append(inits, main) {
				if c.finished != kept[c.spec.Name] {
					t.Errorf("%s: finished %v, want %v", c.spec.Name, c.finished, kept[c.spec.Name])
				}
				if c.finished && c.state.Terminated == nil {
					t.Errorf("%s: kept without a terminated state: %+v", c.spec.Name, c.state)
				}
			}
			if kept["main"] {
				if got := main.state.Terminated.ExitCode; got != tc.code {
					t.Errorf("main: exit code %d, want %d", got, tc.code)
				}
				if main.restarts != 3 {
					t.Errorf("main: restarts %d, want the API server's 3", main.restarts)
				}
			} else {
				// Runs again: one restart more when it had run.
				want := int32(3)
				if tc.main.Running != nil || tc.main.Terminated != nil {
					want = 4
				}
				if main.restarts != want {
					t.Errorf("main: restarts %d, want %d", main.restarts, want)
				}
			}
		})
	}
}
