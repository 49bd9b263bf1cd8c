package dns_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/ctl"
	"github.com/fleetnet/fleetnet/test/fleet"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A Corefile without the reload plugin: wiring it restarts CoreDNS.
const corefileNoReload = `.:53 {
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
}
`

// fleetnetctl dns wire and unwire on a real API server: the forward to
// fleetnet-dns's ClusterIP is added once, wiring again writes nothing,
// CoreDNS without reload is restarted, unwiring gives the Corefile back,
// and what cannot be wired is said with its cause.
func TestDNSWire(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	hub := f.Cluster(t, "hub")
	cs := hub.Clientset(t)
	ctx := context.Background()
	run := func(args ...string) (string, error) {
		cmd := ctl.NewRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(args, "--kubeconfig", hub.KubeconfigPath))
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}, Data: map[string]string{"Corefile": corefileNoReload}}
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"k8s-app": "kube-dns"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns", Image: "registry.k8s.io/coredns/coredns:v1.12.0"}}},
		}},
	}
	if _, err := cs.AppsV1().Deployments("kube-system").Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// No fleetnet-dns yet.
	if _, err := run("dns", "wire"); err == nil || !strings.Contains(err.Error(), "fleetnet-dns's Service fleetnet-system/fleetnet-dns does not exist: install the fleetnet-dns chart first") {
		t.Fatalf("wire without fleetnet-dns: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services("fleetnet-system").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleetnet-system", Name: "fleetnet-dns"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "fleetnet-dns"}, Ports: []corev1.ServicePort{
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := svc.Spec.ClusterIP

	out, err := run("dns", "wire")
	if err != nil {
		t.Fatalf("wire: %v\n%s", err, out)
	}
	wired := corefileOf(t, cs)
	if !strings.HasPrefix(wired, corefileNoReload) || !strings.Contains(wired, "clusterset.local:53 {") || !strings.Contains(wired, "forward . "+ip+"\n") {
		t.Fatalf("wired Corefile:\n%s", wired)
	}
	d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Annotations[keys.AnnotationRestartedAt] == "" || !strings.Contains(out, "restarted kube-system/coredns") {
		t.Errorf("CoreDNS without reload was not restarted (%v):\n%s", d.Spec.Template.Annotations, out)
	}

	before := resourceVersion(t, cs)
	if out, err := run("dns", "wire"); err != nil || !strings.Contains(out, "(unchanged)") {
		t.Errorf("wire again: %v\n%s", err, out)
	}
	if after := resourceVersion(t, cs); after != before {
		t.Errorf("wiring again wrote the ConfigMap (resourceVersion %s → %s)", before, after)
	}
	// A restart that failed before is asked for again.
	if out, err := run("dns", "wire", "--restart"); err != nil || !strings.Contains(out, "(unchanged)") || !strings.Contains(out, "restarted kube-system/coredns") {
		t.Errorf("wire --restart: %v\n%s", err, out)
	}

	if out, err := run("dns", "unwire"); err != nil {
		t.Fatalf("unwire: %v\n%s", err, out)
	}
	if got := corefileOf(t, cs); got != corefileNoReload {
		t.Errorf("unwired Corefile differs from the original:\n%s", got)
	}

	// A forward someone wrote by hand is theirs.
	cm, err = cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["Corefile"] += "clusterset.local:53 {\n    forward . 10.0.0.1\n}\n"
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := run("dns", "wire"); err == nil || !strings.Contains(err.Error(), "ConfigMap kube-system/coredns, key Corefile: the Corefile already has a server block for clusterset.local that fleetnet-dns did not add") {
		t.Errorf("wire over a hand-written forward: %v", err)
	}
	if _, err := run("dns", "wire", "--dns-service", "fleetnet-dns"); err == nil || !strings.Contains(err.Error(), `--dns-service="fleetnet-dns": want namespace/name`) {
		t.Errorf("a bad --dns-service: %v", err)
	}
}

func corefileOf(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["Corefile"]
}

func resourceVersion(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.ResourceVersion
}
