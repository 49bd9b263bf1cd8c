package fleetsetup

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/pki"
	"helm.sh/helm/v3/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// renewBefore is how long a certificate found in a Secret must still be
// valid to be kept; a shorter one is issued again.
const renewBefore = 30 * 24 * time.Hour

// ensureNamespace creates the namespace, labelled as fleetnetctl's and
// enforcing the restricted Pod Security Standard (every chart's Pods meet
// it), unless it exists; an existing one is left as it is.
func (c *Cluster) ensureNamespace(ctx context.Context, name string, out io.Writer) error {
	_, err := c.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: reading namespace %s: %w", c.Name, name, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		keys.LabelManagedBy:                  keys.ManagedByCtl,
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: keys.FieldManagerCtl}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: creating namespace %s: %w", c.Name, name, err)
	}
	fmt.Fprintf(out, "%s: created namespace %s\n", c.Name, name)
	return nil
}

// keyPair is one certificate a Secret holds, as <file>.crt and <file>.key.
type keyPair struct {
	file  string
	id    pki.Identity
	issue func() (*pki.KeyPair, error)
}

// ensureCertSecret makes Secret namespace/name hold ca.crt (the fleet CA)
// and each key pair. A certificate already there that the CA issued for
// the same identity, valid for a while yet, is kept, so that a second run
// rotates nothing and restarts nothing.
func (c *Cluster) ensureCertSecret(ctx context.Context, namespace, name string, ca *pki.KeyPair, pairs []keyPair, out io.Writer) error {
	secrets := c.Kube.CoreV1().Secrets(namespace)
	old, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: reading Secret %s/%s: %w", c.Name, namespace, name, err)
	}
	exists := err == nil
	data := map[string][]byte{}
	if exists {
		maps.Copy(data, old.Data)
	}
	var issued []string
	if string(data["ca.crt"]) != string(ca.CertPEM) {
		data["ca.crt"] = ca.CertPEM
		issued = append(issued, "ca.crt")
	}
	for _, p := range pairs {
		if len(data[p.file+".key"]) > 0 && ca.Check(data[p.file+".crt"], p.id, renewBefore) == nil {
			continue
		}
		kp, err := p.issue()
		if err != nil {
			return fmt.Errorf("issuing the certificate %s of Secret %s/%s: %w", p.file, namespace, name, err)
		}
		data[p.file+".crt"], data[p.file+".key"] = kp.CertPEM, kp.KeyPEM
		issued = append(issued, p.file+".crt")
	}
	if exists && len(issued) == 0 {
		return nil
	}
	if !exists {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{keys.LabelManagedBy: keys.ManagedByCtl}},
			Data:       data,
		}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: keys.FieldManagerCtl}); err != nil {
			return fmt.Errorf("%s: creating Secret %s/%s: %w", c.Name, namespace, name, err)
		}
	} else {
		s := old.DeepCopy()
		s.Data = data
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: keys.FieldManagerCtl}); err != nil {
			return fmt.Errorf("%s: updating Secret %s/%s: %w", c.Name, namespace, name, err)
		}
	}
	fmt.Fprintf(out, "%s: Secret %s/%s: %s\n", c.Name, namespace, name, strings.Join(issued, ", "))
	return nil
}

// Chart short names, as --set takes them ("agent.kubeAPI.qps=100").
var chartNames = map[string]string{
	"registry":  "fleetnet-registry",
	"agent":     "fleetnet-agent",
	"gateway":   "fleetnet-gateway",
	"edge":      "fleetnet-edge",
	"dns":       "fleetnet-dns",
	"discovery": "fleetnet-discovery",
	"console":   "fleetnet-console",
}

// Sets are --set values per chart (its full name), in Helm's --set syntax.
type Sets map[string][]string

// ParseSets reads --set flags of the form <chart>.<key>=<value>, <chart>
// one of registry, agent, gateway, edge, dns, discovery, console.
func ParseSets(flags []string) (Sets, error) {
	sets := Sets{}
	for _, f := range flags {
		short, rest, ok := strings.Cut(f, ".")
		name, known := chartNames[short]
		if !ok || !known || !strings.Contains(rest, "=") {
			return nil, fmt.Errorf("--set=%q: want <chart>.<key>=<value>, <chart> one of %s", f, strings.Join(slices.Sorted(maps.Keys(chartNames)), ", "))
		}
		if _, err := strvals.Parse(rest); err != nil {
			return nil, fmt.Errorf("--set=%q: %w", f, err)
		}
		sets[name] = append(sets[name], rest)
	}
	return sets, nil
}

// values are a chart's values: what the command decided, then the user's
// --set for that chart over them.
func (s Sets) values(chart string, base map[string]any) (map[string]any, error) {
	for _, expr := range s[chart] {
		if err := strvals.ParseInto(expr, base); err != nil {
			return nil, fmt.Errorf("--set %s.%s: %w", chart, expr, err)
		}
	}
	return base, nil
}

// imageValues point a chart at the fleet's images: <repository>/<chart>
// and the tag; empty values keep the chart's defaults.
func imageValues(repository, version, chart string) map[string]any {
	image := map[string]any{}
	if repository != "" {
		image["repository"] = strings.TrimSuffix(repository, "/") + "/" + chart
	}
	if version != "" {
		image["tag"] = version
	}
	return image
}
