package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/testkit"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// echoBasic is the Gateway API conformance echo server's image; the process
// node runs it from bin/echo-basic.
const echoBasic = "registry.k8s.io/gateway-api/echo-basic:v20240412-v1.0.0-394-g40c666fd"

// A Deployment applied as a user would runs on hub's process node: its Pods
// get addresses of hub's pod range, their readiness probes drive the
// EndpointSlice, the Service answers from them through kube-proxy, and
// scaling down releases what the removed Pods held.
func TestProcessNodeRunsDeployment(t *testing.T) {
	ns := namespace(t, "e2e-process-node")
	cl := kube(t, "hub")
	ctx := context.Background()
	labels := map[string]string{"app": "echo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "echo", Image: echoBasic,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 3000}},
					Env: []corev1.EnvVar{
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}},
						PeriodSeconds: 1,
					},
				}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http"),
		}}},
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "client", Image: "nicolaka/netshoot", Command: []string{"sleep", "infinity"},
		}}},
	}
	for _, obj := range []ctrlclient.Object{dep, svc, client} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	hub, err := state.Cluster("hub")
	if err != nil {
		t.Fatal(err)
	}
	readyPods := func(want int) []corev1.Pod {
		var pods []corev1.Pod
		testkit.Eventually(t, 2*time.Minute, fmt.Sprintf("%d echo Pods Running and Ready on the process node", want), func(ctx context.Context) error {
			list := &corev1.PodList{}
			if err := cl.List(ctx, list, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels(labels)); err != nil {
				return err
			}
			pods = pods[:0]
			for _, p := range list.Items {
				if p.DeletionTimestamp != nil {
					return fmt.Errorf("pod %s is terminating", p.Name)
				}
				if p.Spec.NodeName != hub.ProcessNodeName() {
					return fmt.Errorf("pod %s is on node %q", p.Name, p.Spec.NodeName)
				}
				if p.Status.Phase != corev1.PodRunning || !podReady(&p) {
					return fmt.Errorf("pod %s: phase %s, ready %v, containers %s", p.Name, p.Status.Phase, podReady(&p), dev.DescribeContainers(p))
				}
				// An address of each of the cluster's pod ranges (hub is
				// dual-stack), IPv4 first.
				if err := inRanges(p.Status.PodIPs, hub.PodCIDRs); err != nil {
					return fmt.Errorf("pod %s: %w", p.Name, err)
				}
				pods = append(pods, p)
			}
			if len(pods) != want {
				return fmt.Errorf("%d Pods, want %d", len(pods), want)
			}
			return nil
		})
		return pods
	}
	pods := readyPods(3)
	ips := podIPs(pods)
	if len(slices.Compact(slices.Clone(ips))) != 3 {
		t.Fatalf("the Pods share addresses: %v", ips)
	}
	waitSliceAddresses(t, "hub", ns, "echo", ips)

	// Through the Service's ClusterIP, from a Pod: kube-proxy on hub's node
	// sends it to one of the echo servers, which names itself.
	if err := cl.Get(ctx, ctrlclient.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the Service to answer from an echo Pod", func(ctx context.Context) error {
		out, errOut, err := execIn(ctx, t, "hub", ns, client.Name, "client", false, "curl", "-sS", "--max-time", "3", "http://"+svc.Spec.ClusterIP+"/")
		if err != nil {
			return fmt.Errorf("%w: %s", err, errOut)
		}
		var echoed struct {
			Pod       string `json:"pod"`
			Namespace string `json:"namespace"`
		}
		if err := json.Unmarshal([]byte(out), &echoed); err != nil {
			return fmt.Errorf("answer %q: %w", out, err)
		}
		if echoed.Namespace != ns || !strings.HasPrefix(echoed.Pod, "echo-") {
			return fmt.Errorf("answer names pod %q in %q", echoed.Pod, echoed.Namespace)
		}
		return nil
	})

	// Scaled to one: the others end, their addresses are released and the
	// slice follows.
	if err := cl.Patch(ctx, dep, ctrlclient.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	pods = readyPods(1)
	waitSliceAddresses(t, "hub", ns, "echo", podIPs(pods))
	testkit.Eventually(t, time.Minute, "the node to release the removed Pods' addresses", func(context.Context) error {
		recorded, err := dev.NodePods(fleetDir, "hub")
		if err != nil {
			return err
		}
		var here []string
		for _, p := range recorded {
			if p.Namespace == ns && p.Name != "client" {
				here = append(here, p.Name+"="+p.Address)
			}
		}
		if len(here) != 1 {
			return fmt.Errorf("the fleet's state holds %v, want only %s", here, pods[0].Name)
		}
		return nil
	})
}

// The kubelet's other duties: exec with and without a terminal, logs since
// a time, a readiness probe that fails then passes, an image the node does
// not know, a grace period that a process ignoring SIGTERM runs out, and a
// restart of the node itself.
func TestProcessNodeKubeletAPI(t *testing.T) {
	ns := namespace(t, "e2e-process-node-api")
	cl := kube(t, "hub")
	ctx := context.Background()
	shell := func(name, script string, mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "main", Image: "busybox:1.36", Command: []string{"sh", "-c", script},
			}}},
		}
		if mod != nil {
			mod(p)
		}
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	running := func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	}

	// Readiness from an exec probe reading a file of an emptyDir volume.
	probed := shell("probed", "sleep infinity", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "flags", MountPath: "/var/lib/flags"}}
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/var/lib/flags/ready"}}},
			PeriodSeconds: 1,
		}
	})
	// Logs: two lines a few seconds apart, so that sinceTime (whole
	// seconds) can tell them apart.
	logger := shell("logger", "echo first; sleep 3; echo second; sleep infinity", nil)
	unknown := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unknown-image"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "quay.io/someone/app:1"}}},
	}
	if err := cl.Create(ctx, unknown); err != nil {
		t.Fatal(err)
	}
	// A command that does not exist: a start error, judged by the restart
	// policy (Never: the Pod fails).
	nocmd := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-command"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "main", Image: "busybox:1.36", Command: []string{"no-such-command"},
		}}},
	}
	if err := cl.Create(ctx, nocmd); err != nil {
		t.Fatal(err)
	}
	stubborn := shell("stubborn", `trap "" TERM; echo started; while true; do sleep 1; done`, func(p *corev1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = ptr(int64(3))
	})

	t.Run("readiness follows the probe", func(t *testing.T) {
		waitPod(t, cl, probed, "Running, not Ready", func(p *corev1.Pod) error {
			if err := running(p); err != nil {
				return err
			}
			if podReady(p) {
				return fmt.Errorf("ready before its flag exists")
			}
			return nil
		})
		if _, errOut, err := execIn(ctx, t, "hub", ns, probed.Name, "main", false, "touch", "/var/lib/flags/ready"); err != nil {
			t.Fatalf("exec touch: %v: %s", err, errOut)
		}
		waitPod(t, cl, probed, "Ready", func(p *corev1.Pod) error {
			if !podReady(p) {
				return fmt.Errorf("not ready")
			}
			return nil
		})
	})

	t.Run("exec", func(t *testing.T) {
		out, errOut, err := execIn(ctx, t, "hub", ns, probed.Name, "main", false, "sh", "-c", "echo out; echo err >&2; hostname")
		if err != nil {
			t.Fatal(err)
		}
		if out != "out\nprobed\n" || errOut != "err\n" {
			t.Errorf("stdout %q, stderr %q; want %q and %q", out, errOut, "out\nprobed\n", "err\n")
		}
		// A terminal with standard error asked for too, as the kubelet allows.
		out, _, err = execIn(ctx, t, "hub", ns, probed.Name, "main", true, "tty")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(strings.TrimSpace(out), "/dev/pts/") {
			t.Errorf("tty printed %q, want a terminal", out)
		}
		// A failing command's exit code reaches the client.
		_, _, err = execIn(ctx, t, "hub", ns, probed.Name, "main", false, "sh", "-c", "exit 3")
		var exit utilexec.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
			t.Errorf("exit 3 gave %v", err)
		}
	})

	t.Run("logs since a time", func(t *testing.T) {
		waitPod(t, cl, logger, "Running", running)
		cs := kubernetes.NewForConfigOrDie(restConfig(t, "hub"))
		var all string
		testkit.Eventually(t, time.Minute, "both lines in the log", func(ctx context.Context) error {
			b, err := cs.CoreV1().Pods(ns).GetLogs(logger.Name, &corev1.PodLogOptions{Timestamps: true}).DoRaw(ctx)
			if err != nil {
				return err
			}
			all = string(b)
			if !strings.Contains(all, " second\n") {
				return fmt.Errorf("log %q", all)
			}
			return nil
		})
		lines := strings.Split(strings.TrimSpace(all), "\n")
		stamp, _, _ := strings.Cut(lines[1], " ")
		second, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			t.Fatalf("timestamp of %q: %v", lines[1], err)
		}
		since := metav1.NewTime(second.Truncate(time.Second))
		b, err := cs.CoreV1().Pods(ns).GetLogs(logger.Name, &corev1.PodLogOptions{SinceTime: &since}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != "second\n" {
			t.Errorf("logs since %s = %q, want only the second line", since, b)
		}
		b, err = cs.CoreV1().Pods(ns).GetLogs(logger.Name, &corev1.PodLogOptions{TailLines: ptr(int64(1))}).DoRaw(ctx)
		if err != nil || string(b) != "second\n" {
			t.Errorf("tail 1 = %q, %v", b, err)
		}
	})

	t.Run("unknown image waits with the reason", func(t *testing.T) {
		waitPod(t, cl, unknown, "Waiting, naming the image", func(p *corev1.Pod) error {
			if len(p.Status.ContainerStatuses) != 1 {
				return fmt.Errorf("no container status")
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			if w == nil || w.Reason != "ErrImagePull" || !strings.Contains(w.Message, "quay.io/someone/app:1") {
				return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
			}
			if p.Status.Phase != corev1.PodPending {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			return nil
		})
	})

	t.Run("a command that cannot start fails the pod under Never", func(t *testing.T) {
		waitPod(t, cl, nocmd, "Failed with StartError", func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodFailed {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			term := p.Status.ContainerStatuses[0].State.Terminated
			if term == nil || term.Reason != "StartError" || term.ExitCode != 128 || !strings.Contains(term.Message, "no-such-command") {
				return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
			}
			return nil
		})
		// Finished, it gives its address back.
		testkit.Eventually(t, 30*time.Second, "the failed Pod's address released", func(context.Context) error {
			recorded, err := dev.NodePods(fleetDir, "hub")
			if err != nil {
				return err
			}
			for _, p := range recorded {
				if p.Namespace == ns && p.Name == nocmd.Name {
					return fmt.Errorf("%s still holds %s", p.Name, p.Address)
				}
			}
			return nil
		})
	})

	t.Run("grace period ends a process that ignores SIGTERM", func(t *testing.T) {
		waitPod(t, cl, stubborn, "Running", running)
		start := time.Now()
		if err := cl.Delete(ctx, stubborn); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, time.Minute, "the Pod to be gone", func(ctx context.Context) error {
			err := cl.Get(ctx, ctrlclient.ObjectKeyFromObject(stubborn), &corev1.Pod{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
		if took := time.Since(start); took < 3*time.Second {
			t.Errorf("gone after %s, before its 3 s grace period", took)
		}
	})

	t.Run("node restart keeps addresses", func(t *testing.T) {
		waitPod(t, cl, probed, "Ready", func(p *corev1.Pod) error {
			if !podReady(p) {
				return fmt.Errorf("not ready")
			}
			return nil
		})
		before := &corev1.Pod{}
		if err := cl.Get(ctx, ctrlclient.ObjectKeyFromObject(probed), before); err != nil {
			t.Fatal(err)
		}
		// What ran to completion before the restart does not run again:
		// an init container, and a container that exited 0 under
		// OnFailure; the one still running is restarted.
		adopted := shell("adopted", "trap 'exit 0' TERM; while :; do sleep 0.2; done", func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox:1.36", Command: []string{"true"}}}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "once", Image: "busybox:1.36", Command: []string{"true"}})
		})
		adoptedBefore := &corev1.Pod{}
		waitPod(t, cl, adopted, "main running, setup and once completed", func(p *corev1.Pod) error {
			if err := running(p); err != nil {
				return err
			}
			for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
				if done := cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0; done != (cs.Name != "main") {
					return fmt.Errorf("container %s: %+v", cs.Name, cs.State)
				}
			}
			adoptedBefore = p
			return nil
		})
		// A Pod whose main container ended while its sidecar, which
		// ignores SIGTERM, was still being stopped: the node dies in that
		// window. Afterwards the Pod is over; its sidecar ends as lost
		// and does not start again.
		always := corev1.ContainerRestartPolicyAlways
		finishing := shell("finishing", "true", func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.TerminationGracePeriodSeconds = ptr[int64](120)
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "busybox:1.36", RestartPolicy: &always,
				Command: []string{"sh", "-c", "trap '' TERM; while :; do sleep 0.2; done"}}}
		})
		var sidecarBefore corev1.ContainerStatus
		waitPod(t, cl, finishing, "main ended, its sidecar still being stopped", func(p *corev1.Pod) error {
			if len(p.Status.InitContainerStatuses) != 1 || len(p.Status.ContainerStatuses) != 1 {
				return fmt.Errorf("statuses %+v %+v", p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
			}
			side, main := p.Status.InitContainerStatuses[0], p.Status.ContainerStatuses[0]
			if main.State.Terminated == nil || side.State.Running == nil {
				return fmt.Errorf("main %+v, sidecar %+v", main.State, side.State)
			}
			sidecarBefore = side
			return nil
		})
		// SIGKILL: the node's containers die with it (their parent-death
		// signal); `dev up` starts the node again.
		stop(t, "hub/"+dev.PartProcessNode, true)
		// A Pod removed while the node is down: the restarted node removes
		// its folder (Secret data, tokens, logs) and its address.
		gone := &corev1.Pod{}
		if err := cl.Get(ctx, ctrlclient.ObjectKeyFromObject(logger), gone); err != nil {
			t.Fatal(err)
		}
		goneDir := filepath.Join(fleetDir, "hub", "process-node", "pods", fmt.Sprintf("%s_%s_%s", ns, gone.Name, gone.UID))
		if _, err := os.Stat(goneDir); err != nil {
			t.Fatalf("the folder of %s: %v", gone.Name, err)
		}
		if err := cl.Delete(ctx, gone, ctrlclient.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		upCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		s, err := dev.Up(upCtx, devOptions)
		if err != nil {
			// Who holds a port the fleet wants, for the record.
			out, _ := exec.Command("ss", "-ltnp").CombinedOutput()
			t.Fatalf("%v\nlistening sockets:\n%s", err, out)
		}
		state = s
		waitPod(t, cl, probed, "Running again with its address and one more restart", func(p *corev1.Pod) error {
			if err := running(p); err != nil {
				return err
			}
			if p.Status.PodIP != before.Status.PodIP {
				return fmt.Errorf("address %s, was %s", p.Status.PodIP, before.Status.PodIP)
			}
			if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount <= before.Status.ContainerStatuses[0].RestartCount {
				return fmt.Errorf("restart count did not grow")
			}
			if p.Status.ContainerStatuses[0].State.Running == nil {
				return fmt.Errorf("container not running")
			}
			return nil
		})
		waitPod(t, cl, adopted, "main restarted, setup and once not run again", func(p *corev1.Pod) error {
			if err := running(p); err != nil {
				return err
			}
			was := map[string]corev1.ContainerStatus{}
			for _, cs := range slices.Concat(adoptedBefore.Status.InitContainerStatuses, adoptedBefore.Status.ContainerStatuses) {
				was[cs.Name] = cs
			}
			for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
				before := was[cs.Name]
				if cs.Name == "main" {
					if cs.State.Running == nil || cs.RestartCount != before.RestartCount+1 {
						return fmt.Errorf("main: restarts %d (was %d), state %+v", cs.RestartCount, before.RestartCount, cs.State)
					}
					continue
				}
				if cs.RestartCount != before.RestartCount || cs.State.Terminated == nil || !cs.State.Terminated.FinishedAt.Equal(&before.State.Terminated.FinishedAt) {
					return fmt.Errorf("%s ran again: restarts %d (was %d), state %+v", cs.Name, cs.RestartCount, before.RestartCount, cs.State)
				}
			}
			return nil
		})
		waitPod(t, cl, finishing, "Succeeded, its sidecar ended as lost and not started again", func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodSucceeded || len(p.Status.InitContainerStatuses) != 1 {
				return fmt.Errorf("phase %s, init containers %+v", p.Status.Phase, p.Status.InitContainerStatuses)
			}
			side := p.Status.InitContainerStatuses[0]
			if t := side.State.Terminated; t == nil || t.Reason != "ContainerStatusUnknown" || side.RestartCount != sidecarBefore.RestartCount {
				return fmt.Errorf("sidecar restarts %d (was %d), state %+v", side.RestartCount, sidecarBefore.RestartCount, side.State)
			}
			return nil
		})
		testkit.Eventually(t, time.Minute, "the removed Pod's folder and address gone", func(context.Context) error {
			if _, err := os.Stat(goneDir); err == nil {
				return fmt.Errorf("%s is still there", goneDir)
			}
			recorded, err := dev.NodePods(fleetDir, "hub")
			if err != nil {
				return err
			}
			for _, p := range recorded {
				if p.Namespace == ns && p.Name == gone.Name {
					return fmt.Errorf("%s still holds %s", p.Name, p.Address)
				}
			}
			return nil
		})
		recorded, err := dev.NodePods(fleetDir, "hub")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, p := range recorded {
			if other, ok := seen[p.Address]; ok {
				t.Errorf("address %s handed to %s and %s/%s", p.Address, other, p.Namespace, p.Name)
			}
			seen[p.Address] = p.Namespace + "/" + p.Name
		}
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podIPs(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Status.PodIP)
	}
	slices.Sort(out)
	return out
}

// waitSliceAddresses waits until the Service's EndpointSlices hold exactly
// the ready addresses want.
func waitSliceAddresses(t *testing.T, cluster, ns, svc string, want []string) {
	t.Helper()
	cl := kube(t, cluster)
	testkit.Eventually(t, time.Minute, fmt.Sprintf("the slices of %s/%s to hold %v", ns, svc, want), func(ctx context.Context) error {
		list := &discoveryv1.EndpointSliceList{}
		if err := cl.List(ctx, list, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
			return err
		}
		var got []string
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					got = append(got, e.Addresses...)
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("ready addresses %v", got)
		}
		return nil
	})
}

// execIn runs a command in a container through the API server, as kubectl
// exec does, and returns its standard output and error.
func execIn(ctx context.Context, t *testing.T, cluster, ns, pod, container string, tty bool, cmd ...string) (string, string, error) {
	t.Helper()
	cfg := restConfig(t, cluster)
	cs := kubernetes.NewForConfigOrDie(cfg)
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true, TTY: tty}, clientscheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	if err != nil {
		return "", "", err
	}
	var out, errOut bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &out, Tty: tty}
	if !tty {
		opts.Stderr = &errOut
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = exec.StreamWithContext(ctx, opts)
	return out.String(), errOut.String(), err
}

// Lifecycle hooks run as the kubelet runs them: a postStart hook that
// fails kills its container (a FailedPostStartHook event, then a restart),
// and a preStop hook runs to its end before the container gets SIGTERM
// (here it sleeps 3 s and then fails: the pod takes at least that long to
// go, and a FailedPreStopHook event says it failed).
func TestProcessNodeLifecycleHooks(t *testing.T) {
	ns := namespace(t, "e2e-hooks")
	cl := kube(t, "hub")
	ctx := context.Background()
	// The shell ends at once on SIGTERM.
	main := []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.2; done"}
	pod := func(name string, lc *corev1.Lifecycle) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr(int64(20)), Containers: []corev1.Container{{
				Name: "main", Image: "nicolaka/netshoot", Command: main, Lifecycle: lc,
			}}},
		}
	}
	fail := &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "exit 3"}}}
	slowFail := &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "sleep 3; exit 1"}}}
	for _, p := range []*corev1.Pod{pod("poststart", &corev1.Lifecycle{PostStart: fail}), pod("prestop", &corev1.Lifecycle{PreStop: slowFail})} {
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	hasEvent := func(ctx context.Context, pod, reason string) error {
		evs := &corev1.EventList{}
		if err := cl.List(ctx, evs, ctrlclient.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == pod && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no Warning event %s for %s among %d events", reason, pod, len(evs.Items))
	}
	testkit.Eventually(t, 60*time.Second, "a failed postStart hook to restart its container", func(ctx context.Context) error {
		p := &corev1.Pod{}
		if err := cl.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "poststart"}, p); err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < 1 {
			return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
		}
		return hasEvent(ctx, "poststart", "FailedPostStartHook")
	})

	testkit.Eventually(t, 60*time.Second, "the prestop pod to run", func(ctx context.Context) error {
		p := &corev1.Pod{}
		if err := cl.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "prestop"}, p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	deleted := time.Now()
	if err := cl.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prestop"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the prestop pod to go", func(ctx context.Context) error {
		err := cl.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "prestop"}, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	if took := time.Since(deleted); took < 3*time.Second {
		t.Errorf("the pod went %s after its deletion: its 3 s preStop hook did not run first", took.Round(100*time.Millisecond))
	}
	testkit.Eventually(t, 10*time.Second, "the FailedPreStopHook event", func(ctx context.Context) error {
		return hasEvent(ctx, "prestop", "FailedPreStopHook")
	})
}

// Native sidecars (KEP-753): an init container with restartPolicy Always
// starts in init order, and the next init container waits for its startup
// probe; it runs beside the containers, counts for the Pod's readiness, is
// restarted when it ends whatever the Pod's restart policy, and is stopped
// once the containers of a Pod that completes have ended.
func TestProcessNodeSidecars(t *testing.T) {
	ns := namespace(t, "e2e-sidecars")
	cl := kube(t, "hub")
	ctx := context.Background()
	always := corev1.ContainerRestartPolicyAlways
	create := func(p *corev1.Pod) *corev1.Pod {
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	status := func(p *corev1.Pod, name string) corev1.ContainerStatus {
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if cs.Name == name {
				return cs
			}
		}
		return corev1.ContainerStatus{}
	}

	// A job with a proxy sidecar: "check" runs only once the proxy's
	// startup probe passed, and would fail the Pod (restartPolicy Never)
	// if the proxy did not answer; the job ends, then the proxy is stopped
	// and the Pod succeeds.
	job := create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{
				Name: "proxy", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Args: []string{"netexec", "--http-port=9090"},
				RestartPolicy: &always,
				StartupProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/hostname", Port: intstr.FromInt32(9090)}},
					PeriodSeconds: 1, FailureThreshold: 30,
				},
			}, {
				Name: "check", Image: "nicolaka/netshoot", Command: []string{"curl", "-sSf", "--max-time", "2", "http://127.0.0.1:9090/hostname"},
			}},
			Containers: []corev1.Container{{
				Name: "main", Image: "nicolaka/netshoot", Command: []string{"sh", "-c", "curl -sSf --max-time 2 http://127.0.0.1:9090/hostname && sleep 1"},
			}},
		},
	})
	waitPod(t, cl, job, "Succeeded, the proxy stopped after main", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		for _, name := range []string{"proxy", "check", "main"} {
			if status(p, name).State.Terminated == nil {
				return fmt.Errorf("%s not terminated", name)
			}
		}
		for _, name := range []string{"check", "main"} {
			if code := status(p, name).State.Terminated.ExitCode; code != 0 {
				return fmt.Errorf("%s exited %d", name, code)
			}
		}
		if proxy, main := status(p, "proxy").State.Terminated, status(p, "main").State.Terminated; proxy.FinishedAt.Before(&main.FinishedAt) {
			return fmt.Errorf("proxy ended at %s, before main at %s", proxy.FinishedAt, main.FinishedAt)
		}
		return nil
	})

	// A server with a helper sidecar whose readiness comes from a file and
	// which ends (exit 3) when asked to through another.
	flags := corev1.VolumeMount{Name: "flags", MountPath: "/var/lib/flags"}
	loop := "trap 'exit 0' TERM; while :; do sleep 0.2; done"
	web := create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			InitContainers: []corev1.Container{{
				Name: "helper", Image: "busybox:1.36", RestartPolicy: &always, VolumeMounts: []corev1.VolumeMount{flags},
				Command: []string{"sh", "-c", "trap 'exit 0' TERM; while [ ! -e /var/lib/flags/stop ]; do sleep 0.2; done; rm /var/lib/flags/stop; exit 3"},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/var/lib/flags/ready"}}},
					PeriodSeconds: 1,
				},
			}},
			Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sh", "-c", loop}, VolumeMounts: []corev1.VolumeMount{flags}}},
		},
	})
	waitPod(t, cl, web, "Running and Initialized, not Ready while the sidecar is not", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning || status(p, "main").State.Running == nil || status(p, "helper").State.Running == nil {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodInitialized && c.Status != corev1.ConditionTrue {
				return fmt.Errorf("not Initialized")
			}
		}
		if podReady(p) || status(p, "helper").Ready {
			return fmt.Errorf("Ready without the sidecar's readiness")
		}
		if s := status(p, "helper").Started; s == nil || !*s {
			return fmt.Errorf("helper not started")
		}
		return nil
	})
	if _, errOut, err := execIn(ctx, t, "hub", ns, "web", "main", false, "touch", "/var/lib/flags/ready"); err != nil {
		t.Fatalf("touch ready: %v: %s", err, errOut)
	}
	waitPod(t, cl, web, "Ready with its sidecar", func(p *corev1.Pod) error {
		if !podReady(p) {
			return fmt.Errorf("not Ready")
		}
		return nil
	})
	if _, errOut, err := execIn(ctx, t, "hub", ns, "web", "main", false, "touch", "/var/lib/flags/stop"); err != nil {
		t.Fatalf("touch stop: %v: %s", err, errOut)
	}
	waitPod(t, cl, web, "the sidecar restarted, main untouched", func(p *corev1.Pod) error {
		helper, main := status(p, "helper"), status(p, "main")
		if helper.RestartCount != 1 || helper.State.Running == nil {
			return fmt.Errorf("helper: restarts %d, state %+v", helper.RestartCount, helper.State)
		}
		if t := helper.LastTerminationState.Terminated; t == nil || t.ExitCode != 3 {
			return fmt.Errorf("helper's last termination %+v, want exit 3", helper.LastTerminationState)
		}
		if main.RestartCount != 0 || main.State.Running == nil || p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("main: restarts %d, state %+v, phase %s", main.RestartCount, main.State, p.Status.Phase)
		}
		return nil
	})

	// Deleted, a Pod whose main container and sidecar both ignore SIGTERM
	// has no process left within its grace period and the 2 s the kubelet
	// leaves a sidecar once the containers before it used the period up
	// (not twice the period: the sidecar gets what is left of it). The
	// node releases the Pod's address once its last process ended (the API
	// object may go before).
	const grace = 10
	ignoreTerm := "trap '' TERM; while :; do sleep 0.2; done"
	stubborn := create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stubborn"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr[int64](grace),
			InitContainers:                []corev1.Container{{Name: "proxy", Image: "busybox:1.36", RestartPolicy: &always, Command: []string{"sh", "-c", ignoreTerm}}},
			Containers:                    []corev1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sh", "-c", ignoreTerm}}},
		},
	})
	waitPod(t, cl, stubborn, "Running", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning || status(p, "main").State.Running == nil {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	deleted := time.Now()
	if err := cl.Delete(ctx, stubborn); err != nil {
		t.Fatal(err)
	}
	// The bound leaves 4 s for the API's and the node's own latency; the
	// sidecar's whole grace period again would take 10 s more.
	within := (grace+2+4)*time.Second - time.Since(deleted)
	testkit.Eventually(t, within, "the stubborn Pod's processes ended within its grace period and the sidecar's 2 s", func(context.Context) error {
		recorded, err := dev.NodePods(fleetDir, "hub")
		if err != nil {
			return err
		}
		for _, p := range recorded {
			if p.Namespace == ns && p.Name == stubborn.Name {
				return fmt.Errorf("the node still holds its address %s after %s", p.Address, time.Since(deleted).Round(time.Second))
			}
		}
		return nil
	})
}

// waitPod waits until ok accepts the pod p as the API server has it, and
// returns it; what names the state waited for.
func waitPod(t testing.TB, cl ctrlclient.Client, p *corev1.Pod, what string, ok func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	got := &corev1.Pod{}
	testkit.Eventually(t, time.Minute, fmt.Sprintf("pod %s: %s", p.Name, what), func(ctx context.Context) error {
		if err := cl.Get(ctx, ctrlclient.ObjectKeyFromObject(p), got); err != nil {
			return err
		}
		if err := ok(got); err != nil {
			return fmt.Errorf("%w (containers: %s)", err, dev.DescribeContainers(*got))
		}
		return nil
	})
	return got
}
