package ctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/dns/corefile"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type dnsWireFlags struct {
	kubeconfig, context string
	service             string // namespace/name of fleetnet-dns's Service
	configMap, key      string // the CoreDNS Corefile
	deployment          string // CoreDNS, restarted when it does not reload
	zone                string
	cacheSeconds        int
	timeout             time.Duration
	restart             bool
}

func newDNSCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Wire a cluster's CoreDNS to fleetnet-dns for the clusterset zone",
	}
	cmd.AddCommand(newDNSWireCommand(true), newDNSWireCommand(false))
	return cmd
}

func newDNSWireCommand(wire bool) *cobra.Command {
	f := &dnsWireFlags{}
	cmd := &cobra.Command{
		Use:   "wire",
		Short: "Forward the clusterset zone from the cluster's CoreDNS to fleetnet-dns",
		Long: `Adds to the cluster's CoreDNS Corefile (the key Corefile of the ConfigMap
kube-system/coredns) a server block that forwards the clusterset zone to
the ClusterIP of fleetnet-dns's Service, between two marker comments. Run
again, it changes nothing, or replaces its block when the address changed;
"dns unwire" takes the block out and leaves the Corefile as it was. A
server block for the zone that fleetnet did not add is left alone, and the
command fails naming it. CoreDNS reads the change by itself when its
Corefile uses the reload plugin (kubeadm's does, within about a minute of
the kubelet updating the mounted ConfigMap); otherwise its Deployment is
restarted as "kubectl rollout restart" does.`,
		Example: `  fleetnetctl dns wire --context member-1
  fleetnetctl dns unwire --context member-1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			return f.run(ctx, cmd, wire)
		},
	}
	if !wire {
		cmd.Use, cmd.Short, cmd.Example = "unwire", "Take out the clusterset zone's forward that dns wire added", `  fleetnetctl dns unwire --context member-1`
		cmd.Long = "Takes fleetnet's server block out of the cluster's CoreDNS Corefile, leaving\nit as it was before \"dns wire\"; nothing when there is none."
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig's context (default: its current one)")
	fs.StringVar(&f.configMap, "coredns-configmap", "kube-system/coredns", "namespace/name of the ConfigMap holding CoreDNS's Corefile")
	fs.StringVar(&f.key, "coredns-key", "Corefile", "the ConfigMap's key holding the Corefile")
	fs.StringVar(&f.deployment, "coredns-deployment", "kube-system/coredns", "namespace/name of CoreDNS's Deployment, restarted when its Corefile has no reload plugin")
	fs.StringVar(&f.zone, "zone", "clusterset.local", "the clusterset zone")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long the command may take")
	fs.BoolVar(&f.restart, "restart", false, "restart CoreDNS's Deployment even when the Corefile did not change (a restart that failed before), when it has no reload plugin")
	if wire {
		fs.StringVar(&f.service, "dns-service", "fleetnet-system/fleetnet-dns", "namespace/name of fleetnet-dns's Service (the fleetnet-dns chart's)")
		fs.IntVar(&f.cacheSeconds, "cache-seconds", 5, "how long CoreDNS caches fleetnet-dns's answers (0: not at all); no longer than fleetnet-dns's TTL (the chart's ttlSeconds), or a withdrawn import is answered after it is gone")
	}
	return cmd
}

func (f *dnsWireFlags) run(ctx context.Context, cmd *cobra.Command, wire bool) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cmKey, err := namespacedName("--coredns-configmap", f.configMap)
	if err != nil {
		return err
	}
	cm, err := cs.CoreV1().ConfigMaps(cmKey.Namespace).Get(ctx, cmKey.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading CoreDNS's ConfigMap %s: %w", cmKey, err)
	}
	current, ok := cm.Data[f.key]
	if !ok {
		return fmt.Errorf("ConfigMap %s has no key %q (--coredns-key)", cmKey, f.key)
	}
	var next, what string
	if wire {
		addrs, err := f.dnsAddresses(ctx, cs)
		if err != nil {
			return err
		}
		if f.cacheSeconds < 0 {
			return fmt.Errorf("--cache-seconds=%d: must not be negative", f.cacheSeconds)
		}
		if next, err = corefile.Wire(current, f.zone, addrs, f.cacheSeconds); err != nil {
			return fmt.Errorf("ConfigMap %s, key %s: %w", cmKey, f.key, err)
		}
		what = fmt.Sprintf("%s forwarded to fleetnet-dns at %s", f.zone, strings.Join(addrs, ", "))
	} else {
		if next, err = corefile.Unwire(current); err != nil {
			return fmt.Errorf("ConfigMap %s, key %s: %w", cmKey, f.key, err)
		}
		what = fmt.Sprintf("%s no longer forwarded to fleetnet-dns", f.zone)
	}
	out := cmd.OutOrStdout()
	reloads, err := corefile.HasPlugin(next, "reload")
	if err != nil {
		return err
	}
	if next == current {
		fmt.Fprintf(out, "%s: %s (unchanged)\n", cmKey, what)
		if reloads || !f.restart {
			return nil
		}
		return f.restartCoreDNS(ctx, cs, out)
	}
	cm.Data[f.key] = next
	// Conditional on the resourceVersion read: an edit made since fails
	// the update rather than being overwritten.
	if _, err := cs.CoreV1().ConfigMaps(cmKey.Namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: keys.FieldManagerCtl}); err != nil {
		return fmt.Errorf("updating ConfigMap %s: %w", cmKey, err)
	}
	fmt.Fprintf(out, "%s: %s\n", cmKey, what)
	if reloads {
		fmt.Fprintln(out, "CoreDNS reads the change by itself (its reload plugin), once the kubelet has updated the mounted ConfigMap (about a minute)")
		return nil
	}
	return f.restartCoreDNS(ctx, cs, out)
}

// dnsAddresses returns the addresses of fleetnet-dns's Service: each
// ClusterIP, with the port when its DNS port is not 53.
func (f *dnsWireFlags) dnsAddresses(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	key, err := namespacedName("--dns-service", f.service)
	if err != nil {
		return nil, err
	}
	svc, err := cs.CoreV1().Services(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("fleetnet-dns's Service %s does not exist: install the fleetnet-dns chart first, or name its Service with --dns-service", key)
	} else if err != nil {
		return nil, fmt.Errorf("reading fleetnet-dns's Service %s: %w", key, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, fmt.Errorf("fleetnet-dns's Service %s has no ClusterIP (clusterIP %q): CoreDNS needs one address to forward to", key, svc.Spec.ClusterIP)
	}
	port := int32(0)
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolUDP || p.Protocol == "" {
			port = p.Port
			break
		}
	}
	if port == 0 {
		return nil, fmt.Errorf("fleetnet-dns's Service %s has no UDP port", key)
	}
	var addrs []string
	for _, ip := range svc.Spec.ClusterIPs {
		if port == 53 {
			addrs = append(addrs, ip)
		} else {
			addrs = append(addrs, net.JoinHostPort(ip, strconv.Itoa(int(port))))
		}
	}
	return addrs, nil
}

// restart restarts CoreDNS's Deployment the way kubectl rollout restart
// does: a new annotation on its pod template.
func (f *dnsWireFlags) restartCoreDNS(ctx context.Context, cs kubernetes.Interface, out interface{ Write([]byte) (int, error) }) error {
	key, err := namespacedName("--coredns-deployment", f.deployment)
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, keys.AnnotationRestartedAt, time.Now().Format(time.RFC3339))
	if _, err := cs.AppsV1().Deployments(key.Namespace).Patch(ctx, key.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: keys.FieldManagerCtl}); err != nil {
		return fmt.Errorf("the Corefile has no reload plugin and CoreDNS's Deployment %s could not be restarted (run again with --restart, or restart it, to use the change): %w", key, err)
	}
	fmt.Fprintf(out, "restarted %s: the Corefile has no reload plugin\n", key)
	return nil
}

// namespacedName parses a flag's namespace/name.
func namespacedName(flag, v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, errors.New(flag + "=" + strconv.Quote(v) + ": want namespace/name")
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
