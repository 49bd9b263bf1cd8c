package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// EtcdConfig describes an etcd member for test and development clusters.
type EtcdConfig struct {
	// Name is the member's name; "fleet" when empty.
	Name string
	// InitialCluster is etcd's --initial-cluster (name=peer URL, ...); the
	// member alone when empty.
	InitialCluster string
	// Dir holds the data directory and the log.
	Dir string
	// ClientPort and PeerPort are loopback ports.
	ClientPort, PeerPort int
	// Durable keeps fsync on. Tests leave it off: their data is thrown away
	// and fsync dominates start-up time on slow disks.
	Durable bool
}

// Etcd is a running etcd.
type Etcd struct {
	*Process
	// Endpoint is the client URL.
	Endpoint string
}

// StartEtcd starts etcd and waits until it answers its health check.
func StartEtcd(ctx context.Context, bins Binaries, cfg EtcdConfig, opts StartOptions) (*Etcd, error) {
	path, err := bins.Path(EtcdBinary)
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", cfg.ClientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", cfg.PeerPort)
	label := "etcd"
	if cfg.Name == "" {
		cfg.Name = "fleet"
	} else {
		label = cfg.Name
	}
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.Name + "=" + peer
	}
	args := []string{
		"--name=" + cfg.Name,
		"--data-dir=" + filepath.Join(cfg.Dir, "data"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + cfg.InitialCluster,
		"--log-level=warn",
		"--quota-backend-bytes=8589934592",
	}
	if !cfg.Durable {
		args = append(args, "--unsafe-no-fsync")
	}
	p, err := Start(label, path, args, filepath.Join(cfg.Dir, "etcd.log"), opts)
	if err != nil {
		return nil, err
	}
	e := &Etcd{Process: p, Endpoint: client}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = p.WaitFor(ctx, "health", func(ctx context.Context) error { return HTTPOK(ctx, client+"/health") })
	if err != nil {
		p.Kill()
		return nil, err
	}
	return e, nil
}
