// Package auth decides who is calling the registry: a member cluster or an
// administrator, from the mTLS client certificate (the default) or from a
// bearer token mapped to an identity (the documented alternative).
package auth

import (
	"context"
	"crypto/subtle"
	"slices"
	"strings"
	"sync"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Role is what an identity may do.
type Role string

// Roles.
const (
	// RoleCluster writes its own cluster's records and reads everything.
	RoleCluster Role = "cluster"
	// RoleAdmin reads everything and may evict clusters.
	RoleAdmin Role = "admin"
)

// Identity is an authenticated caller. Its name is never empty: what a
// caller may see comes from its role, and the administrators' view from
// RoleAdmin alone, never from a name.
type Identity struct {
	// Name is the cluster id for RoleCluster.
	Name string
	Role Role
}

func (i Identity) String() string { return string(i.Role) + ":" + i.Name }

type identityKey struct{}

// FromContext returns the caller's identity.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// Authenticator finds the identity of a call.
type Authenticator struct {
	// Tokens maps bearer tokens to identities; nil disables tokens. Set
	// it before serving, and with SetTokens afterwards.
	Tokens map[string]Identity
	mu     sync.RWMutex
}

// SetTokens replaces the tokens (a reloaded token file).
func (a *Authenticator) SetTokens(tokens map[string]Identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Tokens = tokens
}

// Authenticate returns the caller's identity, or Unauthenticated.
func (a *Authenticator) Authenticate(ctx context.Context) (Identity, error) {
	a.mu.RLock()
	tokens := a.Tokens
	a.mu.RUnlock()
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(tokens) > 0 {
		for _, v := range md.Get("authorization") {
			token, ok := strings.CutPrefix(v, "Bearer ")
			if !ok {
				continue
			}
			for known, id := range tokens {
				if subtle.ConstantTimeCompare([]byte(known), []byte(token)) == 1 {
					if id.Name == "" {
						// LoadTokens refuses such a line; a map set by
						// hand may hold one.
						return Identity{}, status.Error(codes.Unauthenticated, "bearer token has no name: an identity needs one")
					}
					return id, nil
				}
			}
			return Identity{}, status.Error(codes.Unauthenticated, "bearer token is not known")
		}
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, status.Error(codes.Unauthenticated, "no peer information")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return Identity{}, status.Error(codes.Unauthenticated, "a client certificate signed by the fleet CA, or a bearer token, is required")
	}
	cert := info.State.VerifiedChains[0][0]
	if cert.Subject.CommonName == "" {
		return Identity{}, status.Errorf(codes.Unauthenticated, "client certificate of organization %v has an empty common name: an identity needs a name", cert.Subject.Organization)
	}
	switch {
	case slices.Contains(cert.Subject.Organization, keys.OrganizationAdmins):
		return Identity{Name: cert.Subject.CommonName, Role: RoleAdmin}, nil
	case slices.Contains(cert.Subject.Organization, keys.OrganizationClusters):
		return Identity{Name: cert.Subject.CommonName, Role: RoleCluster}, nil
	}
	return Identity{}, status.Errorf(codes.Unauthenticated, "client certificate %q has neither organization %s nor %s", cert.Subject.CommonName, keys.OrganizationClusters, keys.OrganizationAdmins)
}

// UnaryInterceptor authenticates every unary call.
func (a *Authenticator) UnaryInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if isHealthOrReflection(ctx) {
		return handler(ctx, req)
	}
	id, err := a.Authenticate(ctx)
	if err != nil {
		return nil, err
	}
	return handler(WithIdentity(ctx, id), req)
}

// StreamInterceptor authenticates every streaming call.
func (a *Authenticator) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if strings.HasPrefix(info.FullMethod, "/grpc.") {
		return handler(srv, ss)
	}
	id, err := a.Authenticate(ss.Context())
	if err != nil {
		return err
	}
	return handler(srv, &identityStream{ServerStream: ss, ctx: WithIdentity(ss.Context(), id)})
}

func isHealthOrReflection(ctx context.Context) bool {
	m, _ := grpc.Method(ctx)
	return strings.HasPrefix(m, "/grpc.")
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// RequireCluster allows a cluster to act on its own records only.
func RequireCluster(ctx context.Context, clusterID string) error {
	id, ok := FromContext(ctx)
	if !ok {
		return status.Error(codes.Unauthenticated, "no identity")
	}
	if id.Role != RoleCluster || id.Name != clusterID {
		return status.Errorf(codes.PermissionDenied, "%s may not write the records of cluster %q", id, clusterID)
	}
	return nil
}

// RequireAdmin allows administrators only.
func RequireAdmin(ctx context.Context) error {
	id, ok := FromContext(ctx)
	if !ok {
		return status.Error(codes.Unauthenticated, "no identity")
	}
	if id.Role != RoleAdmin {
		return status.Errorf(codes.PermissionDenied, "%s is not an administrator", id)
	}
	return nil
}

// LoadTokens reads a token file (internal/tokenfile: CSV lines of
// token,name,role, # comments) whose roles are "cluster" or "admin"; a line
// without a name is refused.
func LoadTokens(path string) (map[string]Identity, error) {
	entries, err := tokenfile.Load(path, string(RoleCluster), string(RoleAdmin))
	if err != nil {
		return nil, err
	}
	out := map[string]Identity{}
	for _, e := range entries {
		out[e.Token] = Identity{Name: e.Name, Role: Role(e.Role)}
	}
	return out, nil
}
