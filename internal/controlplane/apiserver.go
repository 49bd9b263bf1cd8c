package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIServerConfig describes one cluster's kube-apiserver.
type APIServerConfig struct {
	// Name is the cluster's name; its data lives under /<EtcdPrefixRoot>/<Name>
	// in etcd.
	Name string
	// Dir holds credentials, kubeconfig and logs.
	Dir string
	// EtcdEndpoint is the client URL of the shared etcd; comma-separated
	// for the members of an etcd cluster.
	EtcdEndpoint string
	// EtcdPrefix separates this cluster's data from the others'.
	EtcdPrefix string
	// Port is the loopback port to serve on.
	Port int
	// ServiceCIDRs are one CIDR per IP family, the primary family first.
	ServiceCIDRs []string
	// KubeletClientCert and KubeletClientKey are what the API server
	// presents to kubelets (exec, logs, port-forward); KubeletCA verifies
	// their serving certificates. Unset, the API server has no kubelet
	// client credentials.
	KubeletClientCert, KubeletClientKey, KubeletCA string
	// PriorityAndFairness turns on API Priority and Fairness, which a test
	// of FlowSchemas needs; off, the API server limits requests in flight
	// only, which costs a local fleet less.
	PriorityAndFairness bool
	// MaxRequestsInflight, when set, is the API server's
	// --max-requests-inflight, and half of it --max-mutating-requests-inflight:
	// with Priority and Fairness, their sum is the seats its levels share.
	// A test sets it low to stand for a busy or small control plane.
	MaxRequestsInflight int
}

// APIServer is a running kube-apiserver.
type APIServer struct {
	*Process
	// Config authenticates as a cluster admin.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig with the same credentials, for kubectl
	// and for the other control-plane processes.
	KubeconfigPath string
	// ServiceAccountKey signs service account tokens.
	ServiceAccountKey string
	// CABundle is what clients of this API server trust.
	CABundle string
}

// StartAPIServer starts kube-apiserver and waits until /readyz passes.
func StartAPIServer(ctx context.Context, bins Binaries, cfg APIServerConfig, opts StartOptions) (*APIServer, error) {
	path, err := bins.Path(KubeAPIServerBinary)
	if err != nil {
		return nil, err
	}
	creds, err := writeCredentials(filepath.Join(cfg.Dir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cfg.Name, err)
	}
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", cfg.Port),
		"--etcd-servers=" + cfg.EtcdEndpoint,
		"--etcd-prefix=" + cfg.EtcdPrefix,
		"--tls-cert-file=" + creds.ServingCert,
		"--tls-private-key-file=" + creds.ServingKey,
		"--token-auth-file=" + creds.TokenFile,
		"--authorization-mode=RBAC",
		"--service-account-key-file=" + creds.ServiceAccountKey,
		"--service-account-signing-key-file=" + creds.ServiceAccountKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=" + strings.Join(cfg.ServiceCIDRs, ","),
		// The API servers of a local fleet all advertise 127.0.0.1, which an
		// EndpointSlice cannot hold; nothing in the fleet needs the
		// "kubernetes" Service's endpoints.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=" + strconv.FormatBool(cfg.PriorityAndFairness),
		"--profiling=false",
	}
	if cfg.MaxRequestsInflight > 0 {
		args = append(args,
			fmt.Sprintf("--max-requests-inflight=%d", cfg.MaxRequestsInflight),
			fmt.Sprintf("--max-mutating-requests-inflight=%d", max(1, cfg.MaxRequestsInflight/2)),
		)
	}
	if cfg.KubeletClientCert != "" {
		args = append(args,
			"--kubelet-client-certificate="+cfg.KubeletClientCert,
			"--kubelet-client-key="+cfg.KubeletClientKey,
			"--kubelet-certificate-authority="+cfg.KubeletCA,
			"--kubelet-preferred-address-types=InternalIP",
		)
	}
	p, err := Start("kube-apiserver "+cfg.Name, path, args, filepath.Join(cfg.Dir, "kube-apiserver.log"), opts)
	if err != nil {
		return nil, err
	}
	s, err := newAPIServer(p, cfg, creds)
	if err != nil {
		p.Kill()
		return nil, err
	}
	if err := s.WaitReady(ctx, time.Minute); err != nil {
		p.Kill()
		return nil, err
	}
	return s, nil
}

// ConnectAPIServer returns an API server that StartAPIServer started earlier
// with the same configuration, possibly from another process. It has no
// Process.
func ConnectAPIServer(ctx context.Context, cfg APIServerConfig) (*APIServer, error) {
	creds, err := writeCredentials(filepath.Join(cfg.Dir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cfg.Name, err)
	}
	return newAPIServer(nil, cfg, creds)
}

func newAPIServer(p *Process, cfg APIServerConfig, creds credentials) (*APIServer, error) {
	restConfig := &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", cfg.Port),
		BearerToken:     creds.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: creds.CABundle},
		QPS:             200,
		Burst:           400,
	}
	kubeconfig := filepath.Join(cfg.Dir, "kubeconfig")
	if err := WriteKubeconfig(kubeconfig, map[string]*rest.Config{cfg.Name: restConfig}, cfg.Name); err != nil {
		return nil, err
	}
	return &APIServer{Process: p, Config: restConfig, KubeconfigPath: kubeconfig, ServiceAccountKey: creds.ServiceAccountKey, CABundle: creds.CABundle}, nil
}

// WaitReady polls /readyz until it passes.
func (s *APIServer) WaitReady(ctx context.Context, timeout time.Duration) error {
	client, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.WaitFor(ctx, "/readyz", func(ctx context.Context) error {
		var status int
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status).Raw()
		if err != nil {
			return fmt.Errorf("/readyz: %w: %s", err, body)
		}
		if status != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", status)
		}
		return nil
	})
}

// WriteKubeconfig writes a kubeconfig with one context per cluster, named
// after it, and current-context set to current.
func WriteKubeconfig(path string, clusters map[string]*rest.Config, current string) error {
	cfg := clientcmdapi.NewConfig()
	for name, rc := range clusters {
		caData := rc.CAData
		if len(caData) == 0 && rc.CAFile != "" {
			data, err := os.ReadFile(rc.CAFile)
			if err != nil {
				return err
			}
			caData = data
		}
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: caData}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.CurrentContext = current
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
