// Package node is the local fleet's process node: a virtual-kubelet node
// per cluster that runs the pods scheduled to it as processes, each pod in a
// network namespace of its own on the fleet's bridge (the address, route
// and resolv.conf that `fleetnetctl dev serve` gives its pods), each
// container in new mount, PID and UTS namespaces, running the program its
// image stands for (images.go). It serves the kubelet API (exec, logs,
// port-forward) on loopback with a certificate of the fleet CA.
//
// It isolates names, not resources: containers share the host's file
// system (volumes and the pod's resolv.conf and hosts are mounted over it
// in the container's own mount namespace, new folders in an overlay), its
// users, its cgroups and its kernel. It is for the local fleet only; no
// chart ships it.
package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/fleetnet/fleetnet/internal/podnet"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	vkslog "github.com/virtual-kubelet/virtual-kubelet/log/slog"
	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
)

// Labels and taints of the node.
const (
	// LabelProcessNode marks the process node.
	LabelProcessNode = "node.fleetnet.dev/process"
)

// Config describes one cluster's process node.
type Config struct {
	// Dir is the local fleet's folder; Cluster the cluster's name.
	Dir, Cluster string
	// Networks gives the pods their networks (the local fleet's,
	// dev.PodNetworks).
	Networks podnet.Networks
	NodeName string
	// StateDir holds the pods' folders (volumes, logs).
	StateDir   string
	Kubeconfig string
	// Listen is the kubelet API's address; InternalIP the node's address
	// (the API server reaches the kubelet API there).
	Listen     string
	InternalIP string
	// ServingCert and ServingKey are the kubelet API's pair; ClientCA
	// verifies its clients (the API servers' kubelet client certificate).
	ServingCert, ServingKey, ClientCA string
	// Tools is the folder of the image programs (agnhost, echo-basic).
	Tools string
	// InitCommand runs the init step (RunInit); the spec's path is appended.
	InitCommand []string
	// RestartBackoff is the first restart back-off (the kubelet's 10 s).
	RestartBackoff time.Duration
	// Region and Zone label the node (topology.kubernetes.io/region and
	// zone) when set: kube-proxy's zone hints and locality policies read
	// them.
	Region, Zone string
}

// Run registers the node and runs its pods until ctx ends.
func Run(ctx context.Context, cfg Config, lg logr.Logger) error {
	if cfg.RestartBackoff == 0 {
		cfg.RestartBackoff = 10 * time.Second
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig=%s: %w", cfg.Kubeconfig, err)
	}
	// client-go's default 5 requests a second would pace Pod status
	// updates (several per Pod start) to a crawl when many Pods start.
	restCfg.QPS, restCfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	tlsConfig, err := servingTLS(cfg)
	if err != nil {
		return err
	}
	_, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen=%s: %w", cfg.Listen, err)
	}
	port, _ := strconv.Atoi(portStr)
	ctx = log.WithLogger(ctx, vkslog.FromSlog(slog.New(logr.ToSlogHandler(lg.WithName("virtual-kubelet")))))
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "fleetnet-process-node", Host: cfg.NodeName})

	mux := http.NewServeMux()
	var provider *Provider
	n, err := nodeutil.NewNode(cfg.NodeName, func(pc nodeutil.ProviderConfig) (nodeutil.Provider, vknode.NodeProvider, error) {
		src := sources{secrets: pc.Secrets, configMaps: pc.ConfigMaps, token: func(pod *corev1.Pod, t *corev1.ServiceAccountTokenProjection) (string, error) {
			return requestToken(ctx, client, pod, t)
		}}
		provider = newProvider(cfg, lg, src, pc.Services)
		provider.recorder = recorder
		provider.client = client
		describeNode(pc.Node, cfg, port)
		return provider, nil, nil
	},
		nodeutil.WithClient(client),
		nodeutil.AttachProviderRoutes(mux),
		func(c *nodeutil.NodeConfig) error {
			c.HTTPListenAddr = cfg.Listen
			c.TLSConfig = tlsConfig
			c.Handler = ttyWithStderr(mux)
			c.EventRecorder = recorder
			c.SkipDownwardAPIResolution = true
			c.NumWorkers = 4
			c.InformerResyncPeriod = time.Minute
			return nil
		},
	)
	if err != nil {
		return fmt.Errorf("node %s: %w", cfg.NodeName, err)
	}
	go func() {
		// Pods recorded by an earlier run whose Pod is gone lose their
		// network once the node knows every Pod (its informer synced).
		select {
		case <-ctx.Done():
			return
		case <-n.Ready():
		}
		provider.forgetStale(ctx, client)
	}()
	lg.Info("Process node starting", "node", cfg.NodeName, "kubeletAPI", cfg.Listen)
	if err := n.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("node %s: %w", cfg.NodeName, err)
	}
	return nil
}

// describeNode fills the Node object the node registers.
func describeNode(n *corev1.Node, cfg Config, port int) {
	n.Labels[LabelProcessNode] = "true"
	n.Labels[corev1.LabelOSStable] = "linux"
	n.Labels[corev1.LabelArchStable] = "amd64"
	n.Labels["type"] = "fleetnet-process-node"
	if cfg.Region != "" {
		n.Labels[corev1.LabelTopologyRegion] = cfg.Region
	}
	if cfg.Zone != "" {
		n.Labels[corev1.LabelTopologyZone] = cfg.Zone
	}
	n.Status.Capacity = nodeCapacity.DeepCopy()
	n.Status.Allocatable = nodeCapacity.DeepCopy()
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: cfg.InternalIP}, {Type: corev1.NodeHostName, Address: cfg.NodeName}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "fleetnet-process-node",
		ContainerRuntimeVersion: "process://",
	}
}

// servingTLS serves the kubelet API with the node's pair and accepts only
// clients with a certificate of the fleet CA.
func servingTLS(cfg Config) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(cfg.ServingCert, cfg.ServingKey)
	if err != nil {
		return nil, fmt.Errorf("kubelet API serving pair %s: %w", cfg.ServingCert, err)
	}
	caPEM, err := os.ReadFile(cfg.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("kubelet API client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("kubelet API client CA %s holds no certificate", cfg.ClientCA)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// ttyWithStderr lets exec and attach ask for a terminal and standard error
// at once, as the kubelet does (the terminal carries both);
// virtual-kubelet refuses the pair.
func ttyWithStderr(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("tty") == "1" || q.Get("tty") == "true" {
			// "error" is the kubelet API's name for stderr.
			if q.Has("error") {
				q.Del("error")
				r.URL.RawQuery = q.Encode()
			}
		}
		h.ServeHTTP(w, r)
	})
}

// requestToken asks for a token of the pod's service account, bound to the
// pod (the TokenRequest API, as the kubelet asks).
func requestToken(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, t *corev1.ServiceAccountTokenProjection) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: t.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if t.Audience != "" {
		req.Spec.Audiences = []string{t.Audience}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return out.Status.Token, nil
}
