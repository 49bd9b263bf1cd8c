package charts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// cluster is a fleet cluster with the clients the checks use.
type cluster struct {
	*fleet.Cluster
	clientset kubernetes.Interface
	dynamic   dynamic.Interface

	mu     sync.Mutex
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newCluster(t testing.TB, c *fleet.Cluster) *cluster {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	cs := c.Clientset(t)
	return &cluster{
		Cluster: c, clientset: cs, dynamic: dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery())),
	}
}

// resetMapper forgets the discovered kinds, after CRDs were added.
func (c *cluster) resetMapper() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mapper.Reset()
}

func (c *cluster) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}

// restrictedNamespace creates a namespace where the API server enforces
// (and warns about) the restricted Pod Security Standard: a Pod of a chart
// that broke it would never be created.
func (c *cluster) restrictedNamespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
		"pod-security.kubernetes.io/warn":            "restricted",
		"pod-security.kubernetes.io/warn-version":    "latest",
	}}}
	if _, err := c.clientset.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("%s: creating namespace %s: %v", c.Name, name, err)
	}
}

func (c *cluster) secret(t testing.TB, namespace, name string, data map[string][]byte) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
	if _, err := c.clientset.CoreV1().Secrets(namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: creating Secret %s/%s: %v", c.Name, namespace, name, err)
	}
}

// checkManifest checks that every object of a release's manifest exists,
// and that the API server accepts it with strict field validation (a
// dry-run server-side apply): helm creates objects with the server's
// default validation, which drops an unknown field with only a warning.
func (c *cluster) checkManifest(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding the release's manifest: %v", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		objs = append(objs, obj)
		what := fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
		m, err := c.mapping(obj.GroupVersionKind())
		if err != nil {
			t.Errorf("%s: %s: %v", c.Name, what, err)
			continue
		}
		var api dynamic.ResourceInterface = c.dynamic.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			api = c.dynamic.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := api.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
			t.Errorf("%s: %s is not in the cluster: %v", c.Name, what, err)
			continue
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
			FieldManager: "charts-test", Force: ptr.To(true), DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict",
		}); err != nil {
			t.Errorf("%s: %s is not accepted with strict field validation: %v", c.Name, what, err)
		}
	}
	if len(objs) == 0 {
		t.Fatal("the release's manifest holds no object")
	}
	return objs
}

// waitForWorkloads waits until every Deployment and StatefulSet among objs
// has its replicas as Running Pods (kwok runs no container but marks Pods
// Running once scheduled: the Pods passed admission, pod security
// included, and their volumes' claims are bound) and returns the Pods.
func (c *cluster) waitForWorkloads(t testing.TB, objs []*unstructured.Unstructured) []corev1.Pod {
	t.Helper()
	var all []corev1.Pod
	for _, obj := range objs {
		var replicas int32
		var selector *metav1.LabelSelector
		switch obj.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			fromUnstructured(t, obj, d)
			replicas, selector = ptr.Deref(d.Spec.Replicas, 1), d.Spec.Selector
		case "StatefulSet":
			s := &appsv1.StatefulSet{}
			fromUnstructured(t, obj, s)
			replicas, selector = ptr.Deref(s.Spec.Replicas, 1), s.Spec.Selector
		default:
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			t.Fatal(err)
		}
		ns := obj.GetNamespace()
		var pods []corev1.Pod
		testkit.Eventually(t, 90*time.Second, fmt.Sprintf("%d running Pods of %s %s", replicas, obj.GetKind(), obj.GetName()), func(ctx context.Context) error {
			list, err := c.clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
			if err != nil {
				return err
			}
			pods = list.Items
			running := 0
			for _, p := range pods {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if running == int(replicas) && len(pods) == int(replicas) {
				return nil
			}
			return fmt.Errorf("%s: %s %s/%s has %d of %d Pods Running (%d Pods); warnings in %s: %s",
				c.Name, obj.GetKind(), ns, obj.GetName(), running, replicas, len(pods), ns, c.warnings(ctx, ns))
		})
		all = append(all, pods...)
	}
	return all
}

// warnings sums up a namespace's Warning events, which say why a Pod was
// not created or not scheduled.
func (c *cluster) warnings(ctx context.Context, ns string) string {
	events, err := c.clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range events.Items {
		out = append(out, fmt.Sprintf("%s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

func fromUnstructured(t testing.TB, u *unstructured.Unstructured, out any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// varRef is $(NAME) in a container's arguments, which Kubernetes expands
// from the container's environment.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkSecretFiles stands in for the kubelet, which kwok does not run: every
// file that a container's arguments name under a Secret's mount must be a
// key of that Secret, as the Pod would see it, and every Secret key its
// environment references must exist.
func (c *cluster) checkSecretFiles(t testing.TB, pod corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	hasKey := func(secret, key string) error {
		s, err := c.clientset.CoreV1().Secrets(pod.Namespace).Get(ctx, secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := s.Data[key]; !ok {
			return fmt.Errorf("the Secret %s has no key %q", secret, key)
		}
		return nil
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, ctr := range pod.Spec.Containers {
		env := map[string]string{}
		for _, e := range ctr.Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
				env[e.Name] = pod.Name
			case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				ref := e.ValueFrom.SecretKeyRef
				if err := hasKey(ref.Name, ref.Key); err != nil {
					t.Errorf("%s: Pod %s/%s, environment %s: %v", c.Name, pod.Namespace, pod.Name, e.Name, err)
				}
			default:
				env[e.Name] = e.Value
			}
		}
		for _, arg := range ctr.Args {
			arg = varRef.ReplaceAllStringFunc(arg, func(ref string) string {
				if v, ok := env[varRef.FindStringSubmatch(ref)[1]]; ok {
					return v
				}
				return ref
			})
			_, file, ok := strings.Cut(arg, "=")
			if !ok || !strings.HasPrefix(file, "/") {
				continue
			}
			for _, m := range ctr.VolumeMounts {
				if path.Dir(file) != m.MountPath {
					continue
				}
				if err := secretFile(volumes[m.Name], path.Base(file), hasKey); err != nil {
					t.Errorf("%s: Pod %s/%s, argument %s: %v", c.Name, pod.Namespace, pod.Name, arg, err)
				}
			}
		}
	}
}

// secretFile checks that name is a file of a Secret volume (or a projected
// volume of Secrets), as the kubelet would write it; other volumes pass.
func secretFile(v corev1.Volume, name string, hasKey func(secret, key string) error) error {
	var sources []corev1.SecretProjection
	switch {
	case v.Secret != nil:
		sources = []corev1.SecretProjection{{LocalObjectReference: corev1.LocalObjectReference{Name: v.Secret.SecretName}, Items: v.Secret.Items}}
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				sources = append(sources, *s.Secret)
			}
		}
	default:
		return nil
	}
	var tried []string
	for _, s := range sources {
		if len(s.Items) == 0 {
			if hasKey(s.Name, name) == nil {
				return nil
			}
			tried = append(tried, s.Name)
			continue
		}
		if i := slices.IndexFunc(s.Items, func(k corev1.KeyToPath) bool { return k.Path == name }); i >= 0 {
			return hasKey(s.Name, s.Items[i].Key)
		}
	}
	return fmt.Errorf("volume %s holds no file %s (Secrets %s)", v.Name, name, strings.Join(tried, ", "))
}
