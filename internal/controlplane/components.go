package controlplane

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// StartControllerManager starts kube-controller-manager for the cluster of s,
// so that Deployments get Pods, Services get EndpointSlices and namespaces get
// their default ServiceAccount.
func StartControllerManager(bins Binaries, s *APIServer, dir string, opts StartOptions) (*Process, error) {
	path, err := bins.Path(KubeControllerManagerBinary)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + s.KubeconfigPath,
		"--leader-elect=false",
		"--secure-port=0",
		"--service-account-private-key-file=" + s.ServiceAccountKey,
		"--root-ca-file=" + s.CABundle,
		"--use-service-account-credentials=false",
		// Let a Deployment scaled in a test converge without the default
		// batching delays.
		"--concurrent-service-endpoint-syncs=5",
		"--endpointslice-updates-batch-period=0s",
	}
	return Start("kube-controller-manager", path, args, filepath.Join(dir, "kube-controller-manager.log"), opts)
}

// StartScheduler starts kube-scheduler for the cluster of s, so that Pods are
// bound to the cluster's kwok node.
func StartScheduler(bins Binaries, s *APIServer, dir string, opts StartOptions) (*Process, error) {
	path, err := bins.Path(KubeSchedulerBinary)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + s.KubeconfigPath,
		"--leader-elect=false",
		"--secure-port=0",
	}
	return Start("kube-scheduler", path, args, filepath.Join(dir, "kube-scheduler.log"), opts)
}

// KwokConfig describes the fake node of a cluster.
type KwokConfig struct {
	// NodeName is the fake node's name.
	NodeName string
	// PodCIDRs are the node's pod ranges, at most one per IP family, the
	// primary family first. kwok gives each Pod one address from each.
	PodCIDRs []string
	// Port is a free loopback port for kwok's own server.
	Port int
	// Taints keep Pods off the fake node unless they tolerate them (a
	// cluster with a process node runs its Pods there).
	Taints []corev1.Taint
	// Labels are added to the node's (topology labels, which kube-proxy
	// reads when it runs as this node).
	Labels map[string]string
}

// StartKwok creates the cluster's fake node and starts kwok, which keeps the
// node Ready and moves Pods bound to it to Running.
func StartKwok(ctx context.Context, bins Binaries, s *APIServer, dir string, cfg KwokConfig, opts StartOptions) (*Process, error) {
	if len(cfg.PodCIDRs) == 0 {
		return nil, fmt.Errorf("kwok node %s: no pod CIDR", cfg.NodeName)
	}
	path, err := bins.Path(KwokBinary)
	if err != nil {
		return nil, err
	}
	stages, err := bins.Path(KwokStages)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return nil, err
	}
	if err := createFakeNode(ctx, client, cfg); err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + s.KubeconfigPath,
		"--config=" + stages,
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		// Only a fallback: kwok's pod-ready stage (PodIPsWith) takes one
		// address from each of the node's spec.podCIDRs, which is how Pods
		// of a dual-stack cluster get both families.
		"--cidr=" + cfg.PodCIDRs[0],
		"--node-ip=127.0.0.1",
		fmt.Sprintf("--server-address=127.0.0.1:%d", cfg.Port),
	}
	return Start("kwok", path, args, filepath.Join(dir, "kwok.log"), opts)
}

func createFakeNode(ctx context.Context, client kubernetes.Interface, cfg KwokConfig) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        cfg.NodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      map[string]string{"type": "kwok", corev1.LabelHostname: cfg.NodeName},
		},
		Spec: corev1.NodeSpec{PodCIDR: cfg.PodCIDRs[0], PodCIDRs: cfg.PodCIDRs, Taints: cfg.Taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
		},
	}
	maps.Copy(node.Labels, cfg.Labels)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A node made by an earlier run gets the taints and labels asked
		// for now (a fleet that gained process nodes keeps Pods off
		// kwok's).
		old, err := client.CoreV1().Nodes().Get(ctx, cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading fake node %s: %w", cfg.NodeName, err)
		}
		sameTaints := equality.Semantic.DeepEqual(old.Spec.Taints, cfg.Taints) || (len(old.Spec.Taints) == 0 && len(cfg.Taints) == 0)
		labelled := true
		for k, v := range cfg.Labels {
			labelled = labelled && old.Labels[k] == v
		}
		if sameTaints && labelled {
			return nil
		}
		old.Spec.Taints = cfg.Taints
		if old.Labels == nil {
			old.Labels = map[string]string{}
		}
		maps.Copy(old.Labels, cfg.Labels)
		if _, err := client.CoreV1().Nodes().Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("tainting fake node %s: %w", cfg.NodeName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating fake node %s: %w", cfg.NodeName, err)
	}
	return nil
}
