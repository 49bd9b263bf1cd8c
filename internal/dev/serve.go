package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// EchoImage is the image of `dev serve`'s pods: Gateway API's echo server,
// which the process node runs from bin/echo-basic (internal/node's image
// table; a test keeps the two in step). It answers every path but /health
// with JSON naming its "pod", "namespace" and "service".
const EchoImage = "registry.k8s.io/gateway-api/echo-basic:v1.6.3"

// AppLabel selects a `dev serve` workload's pods, as `kubectl create
// deployment` labels them: app=<name>.
const AppLabel = "app"

// defaultServeTimeout bounds Serve's wait for pods and endpoints.
const defaultServeTimeout = 2 * time.Minute

// ServeOptions describe an echo workload.
type ServeOptions struct {
	Dir       string
	Cluster   string
	Namespace string
	Name      string
	Replicas  int
	// PortName, Port and TargetPort are the Service's single TCP port; the
	// echo servers listen on TargetPort (echo-basic's HTTP_PORT).
	PortName   string
	Port       int32
	TargetPort int32
	// Headless makes a StatefulSet (pods <name>-0, -1, … with those
	// hostnames) and a Service with clusterIP None instead of a Deployment
	// and a ClusterIP Service.
	Headless bool
	// Timeout bounds the wait for ready pods and endpoints; two minutes
	// when zero.
	Timeout  time.Duration
	Progress io.Writer
}

// Serve applies an echo workload to a cluster of the fleet, as a user would
// with kubectl: the namespace, a Deployment of echo-basic (a StatefulSet
// when headless) and a Service selecting its pods, server-side with the
// field manager keys.FieldManagerDev. The cluster's process node runs the
// pods and kube-controller-manager makes the Service's EndpointSlices;
// Serve returns once the workload has Replicas ready pods and the slices
// list exactly that many ready endpoints, or says what is missing. Replicas
// 0 scales the workload to nothing.
func Serve(ctx context.Context, o ServeOptions) error {
	if o.Replicas < 0 {
		return fmt.Errorf("--replicas=%d: must not be negative", o.Replicas)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Timeout == 0 {
		o.Timeout = defaultServeTimeout
	}
	s, err := Load(o.Dir)
	if err != nil {
		return err
	}
	if !s.Nodes {
		return fmt.Errorf("the fleet in %s has no process nodes, so no pod would run: bring it up as root (`fleetnetctl dev up` gives every cluster a node)", s.Dir)
	}
	cs, err := s.Clientset(o.Cluster)
	if err != nil {
		return err
	}
	if err := applyWorkload(ctx, cs, o); err != nil {
		return err
	}
	return waitServed(ctx, cs, o)
}

func (o ServeOptions) kind() string {
	if o.Headless {
		return "StatefulSet"
	}
	return "Deployment"
}

func (o ServeOptions) labels() map[string]string { return map[string]string{AppLabel: o.Name} }

// echoPod is the pod template of the workload: echo-basic naming its pod,
// namespace and Service, listening on the target port, ready once it
// answers there.
func echoPod(o ServeOptions) *corev1ac.PodTemplateSpecApplyConfiguration {
	fieldRef := func(name, path string) *corev1ac.EnvVarApplyConfiguration {
		return corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath(path)))
	}
	port := intstr.FromInt32(o.TargetPort)
	return corev1ac.PodTemplateSpec().WithLabels(o.labels()).WithSpec(corev1ac.PodSpec().WithContainers(
		corev1ac.Container().WithName("echo").WithImage(EchoImage).
			WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(o.TargetPort).WithProtocol(corev1.ProtocolTCP)).
			WithEnv(
				fieldRef("POD_NAME", "metadata.name"),
				fieldRef("NAMESPACE", "metadata.namespace"),
				corev1ac.EnvVar().WithName("SERVICE_NAME").WithValue(o.Name),
				corev1ac.EnvVar().WithName("HTTP_PORT").WithValue(strconv.Itoa(int(o.TargetPort))),
			).
			WithReadinessProbe(corev1ac.Probe().WithPeriodSeconds(1).
				WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/health").WithPort(port)))))
}

// workloadObjects are the objects Serve applies besides the namespace: the
// Deployment or StatefulSet, and the Service.
func workloadObjects(o ServeOptions) (*appsv1ac.DeploymentApplyConfiguration, *appsv1ac.StatefulSetApplyConfiguration, *corev1ac.ServiceApplyConfiguration) {
	replicas := int32(o.Replicas)
	selector := metav1ac.LabelSelector().WithMatchLabels(o.labels())
	spec := corev1ac.ServiceSpec().WithSelector(o.labels()).WithPorts(
		corev1ac.ServicePort().WithName(o.PortName).WithProtocol(corev1.ProtocolTCP).WithPort(o.Port).WithTargetPort(intstr.FromInt32(o.TargetPort)))
	svc := corev1ac.Service(o.Name, o.Namespace).WithLabels(o.labels()).WithSpec(spec)
	if o.Headless {
		spec.WithClusterIP(corev1.ClusterIPNone)
		sts := appsv1ac.StatefulSet(o.Name, o.Namespace).WithLabels(o.labels()).WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(replicas).WithSelector(selector).WithServiceName(o.Name).
			// All at once, as the hand-made pods started: nothing here
			// depends on its predecessor.
			WithPodManagementPolicy(appsv1.ParallelPodManagement).
			WithTemplate(echoPod(o)))
		return nil, sts, svc
	}
	dep := appsv1ac.Deployment(o.Name, o.Namespace).WithLabels(o.labels()).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(replicas).WithSelector(selector).WithTemplate(echoPod(o)))
	return dep, nil, svc
}

func applyWorkload(ctx context.Context, cs kubernetes.Interface, o ServeOptions) error {
	apply := metav1.ApplyOptions{FieldManager: keys.FieldManagerDev, Force: true}
	if _, err := cs.CoreV1().Namespaces().Apply(ctx, corev1ac.Namespace(o.Namespace), apply); err != nil {
		return fmt.Errorf("applying Namespace %s in %s: %w", o.Namespace, o.Cluster, err)
	}
	if err := removeOtherShape(ctx, cs, o); err != nil {
		return err
	}
	dep, sts, svc := workloadObjects(o)
	var err error
	if dep != nil {
		_, err = cs.AppsV1().Deployments(o.Namespace).Apply(ctx, dep, apply)
	} else {
		_, err = cs.AppsV1().StatefulSets(o.Namespace).Apply(ctx, sts, apply)
	}
	if err != nil {
		return fmt.Errorf("applying %s %s/%s in %s: %w", o.kind(), o.Namespace, o.Name, o.Cluster, err)
	}
	if _, err := cs.CoreV1().Services(o.Namespace).Apply(ctx, svc, apply); err != nil {
		return fmt.Errorf("applying Service %s/%s in %s: %w", o.Namespace, o.Name, o.Cluster, err)
	}
	fmt.Fprintf(o.Progress, "applied %s and Service %s/%s in %s: replicas %d of %s\n", o.kind(), o.Namespace, o.Name, o.Cluster, o.Replicas, EchoImage)
	return nil
}

// removeOtherShape deletes what an earlier `dev serve` of the other shape
// (headless or not) made under the name: the other workload kind, and the
// Service when its clusterIP, which cannot change, is of the other kind.
// Objects that `dev serve` did not apply are left alone.
func removeOtherShape(ctx context.Context, cs kubernetes.Interface, o ServeOptions) error {
	ours := func(m metav1.Object) bool {
		return slices.ContainsFunc(m.GetManagedFields(), func(f metav1.ManagedFieldsEntry) bool { return f.Manager == keys.FieldManagerDev })
	}
	var errs []error
	del := func(kind string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting the %s %s/%s of an earlier dev serve in %s: %w", kind, o.Namespace, o.Name, o.Cluster, err))
		}
	}
	background := metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}
	if o.Headless {
		if d, err := cs.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{}); err == nil && ours(d) {
			del("Deployment", cs.AppsV1().Deployments(o.Namespace).Delete(ctx, o.Name, background))
		}
	} else if st, err := cs.AppsV1().StatefulSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{}); err == nil && ours(st) {
		del("StatefulSet", cs.AppsV1().StatefulSets(o.Namespace).Delete(ctx, o.Name, background))
	}
	if svc, err := cs.CoreV1().Services(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{}); err == nil && ours(svc) &&
		(svc.Spec.ClusterIP == corev1.ClusterIPNone) != o.Headless {
		del("Service", cs.CoreV1().Services(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{}))
	}
	return errors.Join(errs...)
}

func ptrTo[T any](v T) *T { return &v }

// served is what Serve waits on: the workload's replicas and the Service's
// endpoints.
type served struct {
	observed                          bool // the controller has seen the latest spec
	replicas, updated, ready          int32
	endpoints, readyEndpoints, slices int
}

func (s served) done(want int) bool {
	n := int32(want)
	return s.observed && s.replicas == n && s.updated == n && s.ready == n &&
		s.endpoints == want && s.readyEndpoints == want
}

func (s served) String() string {
	return fmt.Sprintf("pods %d (ready %d), endpoints %d (ready %d)", s.replicas, s.ready, s.endpoints, s.readyEndpoints)
}

func observeServed(ctx context.Context, cs kubernetes.Interface, o ServeOptions) (served, error) {
	var st served
	if o.Headless {
		ss, err := cs.AppsV1().StatefulSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return st, err
		}
		st.observed = ss.Status.ObservedGeneration >= ss.Generation
		st.replicas, st.updated, st.ready = ss.Status.Replicas, ss.Status.UpdatedReplicas, ss.Status.ReadyReplicas
	} else {
		d, err := cs.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return st, err
		}
		st.observed = d.Status.ObservedGeneration >= d.Generation
		st.replicas, st.updated, st.ready = d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas
	}
	list, err := cs.DiscoveryV1().EndpointSlices(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + o.Name})
	if err != nil {
		return st, err
	}
	st.slices = len(list.Items)
	for _, sl := range list.Items {
		for _, e := range sl.Endpoints {
			st.endpoints++
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				st.readyEndpoints++
			}
		}
	}
	return st, nil
}

// waitServed waits until the workload has o.Replicas ready pods and the
// Service's slices that many ready endpoints (and no others), printing each
// change; at the deadline it says what is missing, with the pods' states
// and their warnings.
func waitServed(ctx context.Context, cs kubernetes.Interface, o ServeOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	what := fmt.Sprintf("%s %s/%s in %s", o.kind(), o.Namespace, o.Name, o.Cluster)
	started := time.Now()
	var last served
	var lastErr error
	printed := ""
	for {
		st, err := observeServed(ctx, cs, o)
		if err == nil {
			last, lastErr = st, nil
			if line := st.String(); line != printed {
				fmt.Fprintf(o.Progress, "  %s: %s\n", what, line)
				printed = line
			}
			if st.done(o.Replicas) {
				took := time.Since(started).Round(100 * time.Millisecond)
				if o.Replicas == 0 {
					fmt.Fprintf(o.Progress, "%s has no pods left, its Service no endpoints (%s)\n", what, took)
				} else {
					fmt.Fprintf(o.Progress, "%s is served: %d ready pods, listed by the Service's EndpointSlices (%s)\n", what, o.Replicas, took)
				}
				return nil
			}
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("%s: %w", what, lastErr)
			}
			// A fresh context: ctx has ended.
			rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
			pods := describePods(rctx, cs, o)
			rcancel()
			return fmt.Errorf("%s: after %s, want %d ready pods and endpoints, have %s:%s",
				what, time.Since(started).Round(time.Second), o.Replicas, last, pods)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// describePods tells the state of the workload's pods and the warnings
// about them and the workload, one line each.
func describePods(ctx context.Context, cs kubernetes.Interface, o ServeOptions) string {
	var b strings.Builder
	pods, err := cs.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: AppLabel + "=" + o.Name})
	if err != nil {
		return fmt.Sprintf("\n  listing the pods: %v", err)
	}
	if len(pods.Items) == 0 {
		b.WriteString("\n  no pods")
	}
	names := map[string]bool{o.Name: true}
	for _, p := range pods.Items {
		names[p.Name] = true
		fmt.Fprintf(&b, "\n  pod %s: %s", p.Name, podSummary(p))
	}
	events, err := cs.CoreV1().Events(o.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning})
	if err != nil {
		return b.String()
	}
	var warnings []string
	for _, e := range events.Items {
		if names[e.InvolvedObject.Name] || strings.HasPrefix(e.InvolvedObject.Name, o.Name+"-") {
			warnings = append(warnings, fmt.Sprintf("\n  %s %s: %s: %s", strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, e.Reason, e.Message))
		}
	}
	// The latest few; a crash loop repeats itself.
	if len(warnings) > 8 {
		warnings = warnings[len(warnings)-8:]
	}
	for _, w := range warnings {
		b.WriteString(w)
	}
	return b.String()
}

// podSummary is a pod's phase, node and containers in one line.
func podSummary(p corev1.Pod) string {
	node := p.Spec.NodeName
	if node == "" {
		node = "no node yet"
	}
	parts := []string{fmt.Sprintf("%s on %s", p.Status.Phase, node)}
	if p.DeletionTimestamp != nil {
		parts[0] += ", terminating"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, "unschedulable: "+c.Message)
		}
	}
	parts = append(parts, "containers: "+DescribeContainers(p))
	return strings.Join(parts, "; ")
}

// DescribeContainers tells the state of each of the pod's containers, in
// one line ("none" before the node reported any).
func DescribeContainers(p corev1.Pod) string {
	var parts []string
	for _, c := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		switch {
		case c.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting (%s) %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message))
		case c.State.Running != nil:
			parts = append(parts, fmt.Sprintf("%s running, ready %v, %d restarts", c.Name, c.Ready, c.RestartCount))
		case c.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s exited %d (%s) %s", c.Name, c.State.Terminated.ExitCode, c.State.Terminated.Reason, c.State.Terminated.Message))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}
