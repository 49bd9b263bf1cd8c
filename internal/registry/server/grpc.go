package server

import (
	"crypto/tls"

	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/recovered"
	"github.com/fleetnet/fleetnet/internal/registry/auth"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// maxConcurrentStreams bounds the streams (calls and watches) one HTTP/2
// connection holds open at once; a client past it waits for one to end.
// An agent holds two watches and a few tens of calls (its publishing
// workers, lease renewals), `fleetnetctl registry load` 64 writes per
// connection; grpc-go's own default has no bound. Watches are also capped
// per identity, however many connections it opens (Config).
const maxConcurrentStreams = 128

// NewGRPCServer serves r over TLS, with panics in handlers recovered
// (internal/recovered), authentication, the version skew policy
// (internal/skewcheck), metrics, the standard health
// service and server reflection. The health service reports
// SERVING once the registry's view is loaded.
func NewGRPCServer(r *Registry, tlsConfig *tls.Config, authn *auth.Authenticator) (*grpc.Server, *health.Server) {
	// Versions are checked once the caller is known: only an
	// authenticated caller learns the registry's version.
	versionUnary, versionStream := skewcheck.ServerInterceptors("registry")
	s := grpc.NewServer(append(recovered.GRPCServerOptions("registry", r.log),
		grpc.Creds((&tlsrefusal.Observer{Server: "registry", Log: r.log}).Credentials(credentials.NewTLS(tlsConfig))),
		grpc.ChainUnaryInterceptor(r.UnaryInterceptor, authn.UnaryInterceptor, versionUnary),
		grpc.ChainStreamInterceptor(r.StreamInterceptor, authn.StreamInterceptor, versionStream),
		// Agents keep one watch open for days; pings find dead peers.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(8<<20),
		grpc.MaxConcurrentStreams(maxConcurrentStreams),
		// Watch events are marshaled once for every watcher (see codec).
		grpc.ForceServerCodecV2(newCodec()),
	)...)
	registryv1.RegisterRegistryServer(s, r)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(registryv1.Registry_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	go func() {
		r.mu.Lock()
		for !r.synced {
			r.cond.Wait()
		}
		r.mu.Unlock()
		hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus(registryv1.Registry_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}()
	return s, hs
}
