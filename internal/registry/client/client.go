// Package client connects to the registry with the fleet's credentials.
package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

// ReconnectBackoff paces attempts to reach the registry again after the
// connection is lost: at most MaxDelay apart, which must stay well below a
// third of the lease TTL (the renewal period).
var ReconnectBackoff = backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}

// WaitForConnection makes a call wait while the registry is unreachable
// instead of failing at once. Long-lived watches open with it, so that they
// resume as soon as the connection is back (at most ReconnectBackoff.MaxDelay
// after the registry returns) rather than after their own retry delay, which
// grows while the registry is away.
func WaitForConnection() grpc.CallOption { return grpc.WaitForReady(true) }

// Unreachable reports whether err says the registry could not be reached or
// could not answer in time: waiting cures it, and it is no fault of the
// request.
func Unreachable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// Options say where the registry is and who we are.
type Options struct {
	// Address is host:port of the registry, or several, comma-separated:
	// the replicas of one registry. Calls are spread over every replica
	// that answers, and a replica that goes away takes no more calls (see
	// Dial).
	Address string
	// CAFile is the CA bundle that signed the registry's certificate.
	CAFile string
	// CertFile and KeyFile are our client certificate (mTLS). They and
	// CAFile are read again when they change on disk (a rotated Secret),
	// for new connections, until the connection is closed.
	CertFile, KeyFile string
	// Component labels fleetnet_certificate_expiry_seconds (default
	// "registry-client").
	Component string
	// Log gets reloads and files that do not load (default slog.Default()).
	Log *slog.Logger
	// Token is a bearer token, the alternative to a client certificate.
	Token string
	// TokenFile holds a bearer token instead of Token; it is read at each
	// call, so that a rotated token (a Secret's file) is used at once.
	TokenFile string
	// DialOptions are added to the connection's options.
	DialOptions []grpc.DialOption
}

// Dial connects to the registry, announcing this program's name and
// version on every call (api/skew). The connection is lazy: errors of the
// network show up in calls, as Unavailable.
//
// With several addresses the connection keeps a subconnection to each
// replica and sends every call to one that is connected (round robin): when
// a replica dies, its subconnection fails at once (on loopback and most
// networks the peer's socket closes) and the next call goes to another
// replica without waiting for a reconnect. A call already in flight on the
// dead replica fails with Unavailable and is retried on another (see
// retryServiceConfig), so a lease renewal or a write fails over within a
// second. Watches end with Unavailable; their owners resume them from their
// last revision, which any replica can serve, since replicas stream the same
// revisions.
func Dial(o Options) (registryv1.RegistryClient, *grpc.ClientConn, error) {
	addrs, err := SplitAddresses(o.Address)
	if err != nil {
		return nil, nil, err
	}
	if o.Component == "" {
		o.Component = "registry-client"
	}
	files, err := certfiles.Load(certfiles.Files{CertFile: o.CertFile, KeyFile: o.KeyFile, CAFile: o.CAFile,
		Component: o.Component, Usage: "client", Log: o.Log})
	if err != nil {
		return nil, nil, fmt.Errorf("the registry's TLS files: %w", err)
	}
	// A certificate the registry refuses shows as Unavailable (TLS 1.3
	// checks it after the client's handshake): the prober finds and names
	// it, so callers can tell a configuration error from an outage.
	prober := &tlsrefusal.Prober{Addrs: addrs, Config: func(addr string) (*tls.Config, error) {
		host, _, _ := net.SplitHostPort(addr) // SplitAddresses checked it
		return files.ClientConfig(host)
	}}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	// Each connection verifies its replica's certificate against the host
	// it dialled (the target's, or its resolver address's ServerName
	// below); the handshakes that fail are counted under "registry".
	creds := (&tlsrefusal.Observer{Server: "registry", Log: log}).Credentials(files.ClientCredentials())
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithChainUnaryInterceptor(prober.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(prober.StreamClientInterceptor()),
		// gRPC's default reconnect backoff grows to 120 s, and calls fail
		// fast until the next attempt: after a long registry outage the
		// agents would find it back only after their leases expired (seen
		// in the dev fleet). A connection attempt is cheap; keep them close.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: ReconnectBackoff, MinConnectTimeout: 5 * time.Second}),
		grpc.WithDefaultServiceConfig(retryServiceConfig),
	}, skewcheck.DialOptions(filepath.Base(os.Args[0]))...)
	opts = append(opts, o.DialOptions...)
	target := addrs[0]
	if len(addrs) > 1 {
		// A resolver of our own hands gRPC the fixed list; each address
		// keeps its host as the name its certificate is checked against.
		r := manual.NewBuilderWithScheme(fmt.Sprintf("fleetnet-registry-%d", dialSeq.Add(1)))
		state := resolver.State{}
		for _, a := range addrs {
			host, _, _ := net.SplitHostPort(a)
			state.Addresses = append(state.Addresses, resolver.Address{Addr: a, ServerName: host})
		}
		r.InitialState(state)
		opts = append(opts, grpc.WithResolvers(r))
		target = r.Scheme() + ":///registry"
	}
	switch {
	case o.Token != "" && o.TokenFile != "":
		return nil, nil, fmt.Errorf("a token and a token file are given; give one")
	case o.Token != "":
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(o.Token)))
	case o.TokenFile != "":
		if _, err := readToken(o.TokenFile); err != nil {
			return nil, nil, err
		}
		opts = append(opts, grpc.WithPerRPCCredentials(tokenFile(o.TokenFile)))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("registry %s: %w", o.Address, err)
	}
	// Reload the files while the connection lives.
	watchCtx, stopWatching := context.WithCancel(context.Background())
	go files.Run(watchCtx, 0)
	go func() {
		defer stopWatching()
		for s := conn.GetState(); s != connectivity.Shutdown; s = conn.GetState() {
			conn.WaitForStateChange(watchCtx, s)
		}
	}()
	return registryv1.NewRegistryClient(conn), conn, nil
}

// dialSeq makes each connection's resolver scheme unique: schemes are
// registered per connection, and two connections must not share one.
var dialSeq atomic.Int64

// SplitAddresses reads Options.Address: one host:port or several,
// comma-separated.
func SplitAddresses(address string) ([]string, error) {
	if strings.TrimSpace(address) == "" {
		return nil, fmt.Errorf("no registry address given")
	}
	var out []string
	for _, a := range strings.Split(address, ",") {
		a = strings.TrimSpace(a)
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("registry address %q: %w", a, err)
		}
		if host == "" {
			// The registry's certificate is verified against the host.
			return nil, fmt.Errorf("registry address %q: no host", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// retryServiceConfig balances calls over every replica that is connected,
// and retries a call that failed with Unavailable (its replica went away
// mid-call, or the store was electing a leader) a few times within about a
// second. The conditional deletes are left out: a retry of one that did
// delete would answer "not deleted" and mislead its caller. Watches are
// retried by gRPC only until their first message; after that their owner
// resumes them.
const retryServiceConfig = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [
      {"service": "fleetnet.registry.v1.Registry", "method": "RegisterCluster"},
      {"service": "fleetnet.registry.v1.Registry", "method": "RenewLease"},
      {"service": "fleetnet.registry.v1.Registry", "method": "DeregisterCluster"},
      {"service": "fleetnet.registry.v1.Registry", "method": "PutExport"},
      {"service": "fleetnet.registry.v1.Registry", "method": "PutEndpoints"},
      {"service": "fleetnet.registry.v1.Registry", "method": "Watch"},
      {"service": "fleetnet.registry.v1.Registry", "method": "ListClusters"},
      {"service": "fleetnet.registry.v1.Registry", "method": "ListExports"},
      {"service": "fleetnet.registry.v1.Registry", "method": "ListImports"},
      {"service": "fleetnet.registry.v1.Registry", "method": "EvictCluster"}
    ],
    "retryPolicy": {
      "maxAttempts": 4,
      "initialBackoff": "0.1s",
      "maxBackoff": "0.5s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`

// tokenFile is a bearer token read from a file at each call.
type tokenFile string

func (f tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	t, err := readToken(string(f))
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + t}, nil
}

func (tokenFile) RequireTransportSecurity() bool { return true }

func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the registry token: %w", err)
	}
	t := strings.TrimSpace(string(data))
	if t == "" {
		return "", fmt.Errorf("registry token file %s is empty", path)
	}
	return t, nil
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }
