package dev

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestWorkloadObjects(t *testing.T) {
	o := ServeOptions{Namespace: "demo", Name: "echo", Replicas: 2, PortName: "web", Port: 80, TargetPort: 8080}
	dep, sts, svc := workloadObjects(o)
	if dep == nil || sts != nil {
		t.Fatalf("not headless: want a Deployment only, got %v and %v", dep, sts)
	}
	if *dep.Spec.Replicas != 2 || dep.Spec.Selector.MatchLabels[AppLabel] != "echo" || dep.Spec.Template.Labels[AppLabel] != "echo" {
		t.Errorf("Deployment spec %+v", dep.Spec)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if *c.Image != EchoImage || *c.Ports[0].ContainerPort != 8080 {
		t.Errorf("container image %s, port %d", *c.Image, *c.Ports[0].ContainerPort)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			env[*e.Name] = *e.Value
		case e.ValueFrom != nil:
			env[*e.Name] = "fieldRef:" + *e.ValueFrom.FieldRef.FieldPath
		}
	}
	want := map[string]string{"POD_NAME": "fieldRef:metadata.name", "NAMESPACE": "fieldRef:metadata.namespace", "SERVICE_NAME": "echo", "HTTP_PORT": "8080"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if p := c.ReadinessProbe.HTTPGet; p == nil || p.Port.IntValue() != 8080 {
		t.Errorf("readiness probe %+v, want httpGet on 8080", c.ReadinessProbe)
	}
	if svc.Spec.Selector[AppLabel] != "echo" || svc.Spec.ClusterIP != nil || *svc.Spec.Ports[0].Name != "web" || svc.Spec.Ports[0].TargetPort.IntValue() != 8080 {
		t.Errorf("Service spec %+v", svc.Spec)
	}

	o.Headless = true
	dep, sts, svc = workloadObjects(o)
	if dep != nil || sts == nil {
		t.Fatalf("headless: want a StatefulSet only, got %v and %v", dep, sts)
	}
	if *sts.Spec.ServiceName != "echo" || *sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("StatefulSet spec %+v", sts.Spec)
	}
	if svc.Spec.ClusterIP == nil || *svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("headless Service clusterIP %v, want None", svc.Spec.ClusterIP)
	}
}

// A workload that does not get ready ends the wait with what is missing:
// the counts, each pod's state and the warnings about them.
func TestWaitServedSaysWhatIsMissing(t *testing.T) {
	o := ServeOptions{Cluster: "east", Namespace: "demo", Name: "echo", Replicas: 2, Timeout: 300 * time.Millisecond}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo", Generation: 1},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1},
	}
	ready := func(r bool) discoveryv1.EndpointConditions { return discoveryv1.EndpointConditions{Ready: &r} }
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
		Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.128"}, Conditions: ready(true)}},
	}
	pod := func(name string, st corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, Labels: map[string]string{AppLabel: "echo"}},
			Spec:       corev1.PodSpec{NodeName: "fleetnet-node-east"},
			Status:     corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "echo", State: st}}},
		}
	}
	waiting := pod("echo-1", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "image not in the table"}})
	running := pod("echo-2", corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	running.Status.Phase = corev1.PodRunning
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "demo", Name: "echo-1.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: "echo-1"},
		Type:           corev1.EventTypeWarning, Reason: "Failed", Message: "pulling the image failed",
	}
	cs := fake.NewClientset(dep, slice, waiting, running, event)
	var progress strings.Builder
	o.Progress = &progress
	err := waitServed(context.Background(), cs, o)
	if err == nil {
		t.Fatal("waitServed: nil, want an error")
	}
	for _, want := range []string{
		"Deployment demo/echo in east", "want 2 ready pods", "pods 2 (ready 1), endpoints 1 (ready 1)",
		"pod echo-1: Pending on fleetnet-node-east; containers: echo waiting (ErrImagePull) image not in the table",
		"pod echo-2: Running", "pod echo-1: Failed: pulling the image failed",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !strings.Contains(progress.String(), "pods 2 (ready 1)") {
		t.Errorf("progress %q", progress.String())
	}

	// Ready: it returns.
	dep.Status.ReadyReplicas = 2
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.1.129"}, Conditions: ready(true)})
	cs = fake.NewClientset(dep, slice)
	o.Timeout = 5 * time.Second
	if err := waitServed(context.Background(), cs, o); err != nil {
		t.Fatal(err)
	}
}

// A state file of an older fleetnetctl whose `dev serve` ran its own echo
// pods is refused with what to do; Down's loader still sees those pods'
// servers, to end them.
func TestLoadRefusesEchoPodsOfAnOlderDevServe(t *testing.T) {
	dir := t.TempDir()
	old := `{"dir": "` + dir + `", "basePort": 17400, "clusters": [{"name": "east", "index": 1}],
  "pods": {
    "east/demo/echo-0": {"cluster": "east", "namespace": "demo", "service": "echo", "name": "echo-0", "netns": "fleetnet-1", "hostVeth": "fnh1", "address": "10.244.1.128", "process": {"pid": 4242, "startTime": 7, "log": "x"}},
    "east/demo/web-abc": {"cluster": "east", "namespace": "demo", "name": "web-abc", "netns": "fleetnet-2", "hostVeth": "fnh2", "address": "10.244.1.129", "node": true, "uid": "u1", "process": {"pid": 0, "startTime": 0, "log": ""}}
  }}`
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "east/demo/echo-0") || !strings.Contains(err.Error(), "fleetnetctl dev down --dir "+dir) {
		t.Errorf("Load: %v, want a refusal naming the pod and dev down", err)
	}
	s, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.legacyServers) != 1 || s.legacyServers["east/demo/echo-0"].Pid != 4242 {
		t.Errorf("legacy servers %+v, want echo-0's", s.legacyServers)
	}
	if len(s.Pods) != 2 || s.Pods["east/demo/web-abc"].UID != "u1" {
		t.Errorf("pods %+v", s.Pods)
	}

	// Without such pods, the old format loads and is written anew.
	delete(s.Pods, "east/demo/echo-0")
	s.legacyServers = nil
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	if s, err = Load(dir); err != nil || s.Version != stateVersion {
		t.Errorf("Load after save: version %v, %v", s, err)
	}

	// A newer format is refused.
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"version": 99}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "newer fleetnetctl") {
		t.Errorf("Load of format 99: %v", err)
	}
}
