// Package skewcheck applies the version skew policy (api/skew) where
// fleetnet's binaries meet: gRPC interceptors that announce this binary's
// version on every call and check the caller's, and the count of refused
// peers.
package skewcheck

import (
	"context"
	"strings"

	"github.com/fleetnet/fleetnet/api/skew"
	"github.com/fleetnet/fleetnet/internal/version"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/semver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Refused counts peers refused for their version, by the server that
// refused them and how the peer's version stands to the server's: newer,
// older (more than one release behind) or invalid. Not the version itself:
// a caller chooses what it announces, and a label of its choosing would
// let it make series without end; the refusal's message and log name it.
var Refused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fleetnet_version_refused_total",
	Help: "Calls and streams refused because the peer's version is outside the skew policy, by server and the peer's version: newer, older or invalid.",
}, []string{"server", "peer"})

// Register adds Refused and fleetnet_build_info to reg (once; registering
// them again is not an error).
func Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{Refused, version.Collector()} {
		if err := reg.Register(c); err != nil {
			if _, ok := err.(prometheus.AlreadyRegisteredError); !ok {
				return err
			}
		}
	}
	return nil
}

// Check applies the policy to a peer that announced announced, for server
// (a metric label: "registry", "gateway-model-stream", ...): nil, or a
// FailedPrecondition naming both versions and the policy, counted.
func Check(server, component, announced string) error {
	err := skew.Check(version.Get().Version, component, announced)
	if err == nil {
		return nil
	}
	Refused.WithLabelValues(server, Standing(version.Get().Version, announced)).Inc()
	return status.Error(codes.FailedPrecondition, err.Error())
}

// Standing is how announced stands to the server's version for
// Refused's peer label: "newer", "older" or "invalid".
func Standing(server, announced string) string {
	v, err := skew.Normalize(announced)
	switch {
	case err != nil:
		return "invalid"
	case semver.Compare(v, server) > 0:
		return "newer"
	}
	return "older"
}

// Peer is what a caller announced in its request metadata.
type Peer struct {
	Component, Version string
	Capabilities       skew.Capabilities
}

// FromIncoming reads a caller's announcement from ctx.
func FromIncoming(ctx context.Context) Peer {
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return Peer{Component: first(skew.MetadataComponent), Version: first(skew.MetadataVersion),
		Capabilities: skew.ParseCapabilities(md.Get(skew.MetadataCapabilities)...)}
}

// Announced is the metadata this binary announces as component, with
// capabilities.
func Announced(component string, capabilities ...string) metadata.MD {
	md := metadata.Pairs(skew.MetadataVersion, version.Get().Version)
	if component != "" {
		md.Set(skew.MetadataComponent, component)
	}
	if len(capabilities) > 0 {
		md.Set(skew.MetadataCapabilities, strings.Join(capabilities, ","))
	}
	return md
}

// ServerInterceptors check every call's announced version for server and
// answer with this binary's version in the response headers (a refused
// call too, so that the caller can name it).
func ServerInterceptors(server string, capabilities ...string) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		_ = grpc.SetHeader(ctx, Announced(server, capabilities...))
		p := FromIncoming(ctx)
		if err := Check(server, p.Component, p.Version); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		_ = ss.SetHeader(Announced(server, capabilities...))
		p := FromIncoming(ss.Context())
		if err := Check(server, p.Component, p.Version); err != nil {
			return err
		}
		return handler(srv, ss)
	}
	return unary, stream
}

// DialOptions announce this binary as component on every call.
func DialOptions(component string, capabilities ...string) []grpc.DialOption {
	md := Announced(component, capabilities...)
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.NewOutgoingContext(ctx, join(ctx, md)), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.NewOutgoingContext(ctx, join(ctx, md)), desc, cc, method, opts...)
		}),
	}
}

// join adds md to what ctx already sends, md's keys replacing.
func join(ctx context.Context, md metadata.MD) metadata.MD {
	out, _ := metadata.FromOutgoingContext(ctx)
	out = out.Copy()
	for k, v := range md {
		out[k] = v
	}
	return out
}

// ServerVersion reads the version a server answered with from a call's
// response header (skew.Unannounced when it announced none).
func ServerVersion(header metadata.MD) string {
	if v := header.Get(skew.MetadataVersion); len(v) > 0 && v[0] != "" {
		return v[0]
	}
	return skew.Unannounced
}
