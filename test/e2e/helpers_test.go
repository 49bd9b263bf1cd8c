package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/scheme"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var clusters = []string{"hub", "east", "west"}

// restConfig returns an admin config for a cluster of the fleet.
func restConfig(t testing.TB, cluster string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", state.KubeconfigPath(cluster))
	if err != nil {
		t.Fatalf("kubeconfig of %s: %v", cluster, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}

var (
	clientsMu sync.Mutex
	clients   = map[string]client.Client{}
)

// kube returns a client for a cluster of the fleet, made once per cluster.
func kube(t testing.TB, cluster string) client.Client {
	t.Helper()
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[cluster]; ok {
		return c
	}
	c, err := client.New(restConfig(t, cluster), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	clients[cluster] = c
	return c
}

// namespace creates a namespace in every cluster and deletes it when the
// test ends.
func namespace(t testing.TB, name string) string {
	t.Helper()
	for _, c := range clusters {
		cl := kube(t, c)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := cl.Create(context.Background(), ns); err != nil {
			t.Fatalf("creating namespace %s in %s: %v", name, c, err)
		}
		t.Cleanup(func() { _ = cl.Delete(context.Background(), ns) })
	}
	return name
}

// service describes an exported Service and its endpoints.
type service struct {
	name      string
	headless  bool
	dualStack bool // RequireDualStack; needs a dual-stack cluster
	portName  string
	port      int32
	addresses []string // IPv4 and IPv6
	// exportedLabels and exportedAnnotations go into the ServiceExport's spec.
	exportedLabels, exportedAnnotations map[string]string
}

// export creates the Service, an EndpointSlice with its addresses and the
// ServiceExport in cluster.
func export(t testing.TB, cluster, ns string, s service) {
	t.Helper()
	ctx := context.Background()
	cl := kube(t, cluster)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: s.portName, Port: s.port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080),
		}}},
	}
	if s.headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if s.dualStack {
		svc.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyRequireDualStack)
	}
	if err := cl.Create(ctx, svc); err != nil {
		t.Fatalf("%s: creating Service %s/%s: %v", cluster, ns, s.name, err)
	}
	setEndpoints(t, cluster, ns, s.name, s.portName, s.addresses)
	se := &mcsv1beta1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name},
		Spec:       mcsv1beta1.ServiceExportSpec{ExportedLabels: s.exportedLabels, ExportedAnnotations: s.exportedAnnotations},
	}
	if err := cl.Create(ctx, se); err != nil {
		t.Fatalf("%s: creating ServiceExport %s/%s: %v", cluster, ns, s.name, err)
	}
}

// setEndpoints creates or replaces the Service's IPv4 EndpointSlice, and
// its IPv6 one when there are IPv6 addresses.
func setEndpoints(t testing.TB, cluster, ns, name, portName string, addresses []string) {
	t.Helper()
	var v4, v6 []string
	for _, a := range addresses {
		if strings.Contains(a, ":") {
			v6 = append(v6, a)
		} else {
			v4 = append(v4, a)
		}
	}
	setSlice(t, cluster, ns, name, name+"-e2e", discoveryv1.AddressTypeIPv4, portName, v4)
	if len(v6) > 0 {
		setSlice(t, cluster, ns, name, name+"-e2e-v6", discoveryv1.AddressTypeIPv6, portName, v6)
	}
}

func setSlice(t testing.TB, cluster, ns, service, name string, addressType discoveryv1.AddressType, portName string, addresses []string) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "e2e.fleetnet.dev",
		}},
		AddressType: addressType,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for _, a := range addresses {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
		})
	}
	cl := kube(t, cluster)
	ctx := context.Background()
	// Read first, so that a change costs exactly one API write (benchmarks
	// count them).
	old := &discoveryv1.EndpointSlice{}
	err := cl.Get(ctx, client.ObjectKeyFromObject(slice), old)
	switch {
	case apierrors.IsNotFound(err):
		err = cl.Create(ctx, slice)
	case err == nil:
		old.Endpoints = slice.Endpoints
		err = cl.Update(ctx, old)
	}
	if err != nil {
		t.Fatalf("%s: writing EndpointSlice %s/%s: %v", cluster, ns, slice.Name, err)
	}
}

func ptr[T any](v T) *T { return &v }

// imported is what a cluster holds of one import.
type imported struct {
	si *mcsv1beta1.ServiceImport
	// addresses by source cluster, sorted.
	addresses map[string][]string
	slices    []discoveryv1.EndpointSlice
}

// getImport reads the ServiceImport and its EndpointSlices in cluster.
func getImport(ctx context.Context, cluster client.Client, ns, name string) (*imported, error) {
	si := &mcsv1beta1.ServiceImport{}
	if err := cluster.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, si); err != nil {
		return nil, err
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := cluster.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: name}); err != nil {
		return nil, err
	}
	imp := &imported{si: si, addresses: map[string][]string{}, slices: list.Items}
	for _, s := range list.Items {
		src := s.Labels[mcsv1beta1.LabelSourceCluster]
		for _, e := range s.Endpoints {
			imp.addresses[src] = append(imp.addresses[src], e.Addresses...)
		}
	}
	for _, a := range imp.addresses {
		sort.Strings(a)
	}
	return imp, nil
}

func statusClusters(si *mcsv1beta1.ServiceImport) []string {
	var out []string
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	sort.Strings(out)
	return out
}

// waitImport waits until the import in cluster lists exactly the source
// clusters in want, with their addresses, and returns it.
func waitImport(t testing.TB, cluster, ns, name string, want map[string][]string, timeout time.Duration) *imported {
	t.Helper()
	cl := kube(t, cluster)
	var got *imported
	testkit.Eventually(t, timeout, fmt.Sprintf("the import %s/%s in %s from %v", ns, name, cluster, want), func(ctx context.Context) error {
		imp, err := getImport(ctx, cl, ns, name)
		if err != nil {
			return fmt.Errorf("%s: %w", cluster, err)
		}
		var sources []string
		for src, addrs := range want {
			sources = append(sources, src)
			w := slices.Clone(addrs)
			sort.Strings(w)
			if !slices.Equal(imp.addresses[src], w) {
				return fmt.Errorf("%s: addresses from %s are %v, want %v", cluster, src, imp.addresses[src], w)
			}
		}
		sort.Strings(sources)
		if got := statusClusters(imp.si); !slices.Equal(got, sources) {
			return fmt.Errorf("%s: ServiceImport %s/%s lists clusters %v, want %v", cluster, ns, name, got, sources)
		}
		if len(imp.addresses) != len(want) {
			return fmt.Errorf("%s: slices come from %v, want %v", cluster, keysOf(imp.addresses), sources)
		}
		got = imp
		return nil
	})
	return got
}

// waitNoImport waits until cluster holds nothing of the import.
func waitNoImport(t testing.TB, cluster, ns, name string, timeout time.Duration) {
	t.Helper()
	cl := kube(t, cluster)
	testkit.Eventually(t, timeout, fmt.Sprintf("nothing of the import %s/%s in %s", ns, name, cluster), func(ctx context.Context) error {
		imp, err := getImport(ctx, cl, ns, name)
		if apierrors.IsNotFound(err) {
			list := &discoveryv1.EndpointSliceList{}
			if err := cl.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: name}); err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%s: %d imported EndpointSlices left", cluster, len(list.Items))
			}
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s: ServiceImport %s/%s still there, from %v", cluster, ns, name, statusClusters(imp.si))
	})
}

// waitCondition waits until the object's condition has the status and
// reason (any reason when empty) and returns its message.
func waitCondition(t testing.TB, cluster string, obj client.Object, condType string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	cl := kube(t, cluster)
	var msg string
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%s %s=%s %s in %s", obj.GetName(), condType, status, reason, cluster), func(ctx context.Context) error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *mcsv1beta1.ServiceExport:
			conds = o.Status.Conditions
		case *mcsv1beta1.ServiceImport:
			conds = o.Status.Conditions
		}
		c := meta.FindStatusCondition(conds, condType)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("%s: %s %s: condition %s is %+v, want %s/%s", cluster, obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), condType, c, status, reason)
		}
		msg = c.Message
		return nil
	})
	return msg
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// agentWrites counts API writes of the kinds an agent writes: what it
// imports and its ServiceExports' status.
func agentWrites(t testing.TB, cluster string) float64 {
	t.Helper()
	return fleet.APIWrites(t, cluster, restConfig(t, cluster), "serviceimports", "services", "endpointslices", "serviceexports")
}

// importWrites counts API writes of the kinds an agent imports.
func importWrites(t testing.TB, cluster string) float64 {
	t.Helper()
	return fleet.APIWrites(t, cluster, restConfig(t, cluster), "serviceimports", "services", "endpointslices")
}

// stop ends a component of the fleet (SIGKILL when kill is set).
func stop(t testing.TB, component string, kill bool) {
	t.Helper()
	if err := dev.Stop(fleetDir, component, kill); err != nil {
		t.Fatal(err)
	}
}

// up starts whatever of the fleet is not running and waits for every agent
// to register.
func up(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := dev.Up(ctx, devOptions)
	if err != nil {
		t.Fatal(err)
	}
	state = s
}

// resourceVersions maps "kind/name" to resourceVersion for the import's
// objects, to tell whether anything was rewritten.
func resourceVersions(imp *imported) map[string]string {
	out := map[string]string{"ServiceImport/" + imp.si.Name: imp.si.ResourceVersion}
	for _, s := range imp.slices {
		out["EndpointSlice/"+s.Name] = s.ResourceVersion
	}
	return out
}

// serveEcho runs `dev serve`'s echo workload (a Deployment, or a
// StatefulSet when headless, of echo-basic on the cluster's process node,
// and its Service) and waits until its pods are ready and listed by the
// Service's EndpointSlices. The test's namespace takes it away.
func serveEcho(t *testing.T, cluster, ns, name string, replicas int, headless bool) {
	t.Helper()
	err := dev.Serve(context.Background(), dev.ServeOptions{
		Dir: fleetDir, Cluster: cluster, Namespace: ns, Name: name, Replicas: replicas,
		PortName: "http", Port: 80, TargetPort: 8080, Headless: headless, Progress: t.Output(),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// getEcho sends a GET to url and wants echo-basic's 200 answer.
func getEcho(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, err := parseEcho(body); resp.StatusCode != http.StatusOK || err != nil {
		return fmt.Errorf("%d %q", resp.StatusCode, body)
	}
	return nil
}

// echoAnswer is what echo-basic answers: its pod, namespace and Service.
type echoAnswer struct {
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
}

func parseEcho(body []byte) (echoAnswer, error) {
	var a echoAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return a, fmt.Errorf("answer %q: %w", body, err)
	}
	if a.Pod == "" {
		return a, fmt.Errorf("answer %q names no pod", body)
	}
	return a, nil
}

// appPods lists the pods labelled app=<app> in namespace ns of every
// cluster of the fleet, by name, with the cluster each is in: how the tests
// tell which cluster answered.
func appPods(t testing.TB, ns, app string) map[string]clusterPod {
	t.Helper()
	out := map[string]clusterPod{}
	for _, c := range clusters {
		list := &corev1.PodList{}
		if err := kube(t, c).List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{dev.AppLabel: app}); err != nil {
			t.Fatalf("%s: listing the pods of %s/%s: %v", c, ns, app, err)
		}
		for _, p := range list.Items {
			if other, ok := out[p.Name]; ok {
				t.Fatalf("pod %s/%s is in %s and in %s: its name does not tell the cluster", ns, p.Name, other.cluster, c)
			}
			out[p.Name] = clusterPod{cluster: c, pod: p}
		}
	}
	return out
}

// clusterPod is a pod and the cluster it is in.
type clusterPod struct {
	cluster string
	pod     corev1.Pod
}

// runPod creates a Pod of one container that sleeps (image netshoot: the
// machine's curl, dig and the like) to run commands in with execIn, and
// waits until it is Ready.
func runPod(t *testing.T, cluster, ns, name string) {
	t.Helper()
	cl := kube(t, cluster)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: name, Image: "nicolaka/netshoot", Command: []string{"sleep", "infinity"},
		}}},
	}
	if err := cl.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, fmt.Sprintf("pod %s/%s Ready in %s", ns, name, cluster), func(ctx context.Context) error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if !podReady(pod) {
			return fmt.Errorf("pod %s: phase %s, containers %s", name, pod.Status.Phase, dev.DescribeContainers(*pod))
		}
		return nil
	})
}
