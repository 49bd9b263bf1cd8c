package store

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
)

// Embedded is a single-node etcd inside the registry process, so one binary
// is a complete, durable registry. Writes are acknowledged only after they
// are fsynced to the data directory.
type Embedded struct {
	etcd   *embed.Etcd
	Client *clientv3.Client
}

// StartEmbedded starts etcd on dataDir. It listens on loopback ports the
// kernel picks; the registry talks to it in-process.
func StartEmbedded(ctx context.Context, dataDir string, log *slog.Logger) (*Embedded, error) {
	cfg := embed.NewConfig()
	cfg.Name = "fleetnet-registry"
	cfg.Dir = dataDir
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:2380"}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Keep history for resuming watches, compact the rest.
	cfg.AutoCompactionMode = "revision"
	cfg.AutoCompactionRetention = "100000"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd in %s: %w", dataDir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s did not become ready within a minute", dataDir)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	log.Info("embedded etcd ready", "dataDir", dataDir)
	return &Embedded{etcd: e, Client: v3client.New(e.Server)}, nil
}

// Close stops etcd.
func (e *Embedded) Close() {
	e.Client.Close()
	e.etcd.Close()
}
