package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// TestAuthenticateRefusesNamelessIdentities: a certificate with an empty
// common name, or a token mapped to an empty name, authenticates no one
// (an empty name is what the registry's view calls the administrators);
// named ones authenticate with the role their organization or token
// gives.
func TestAuthenticateRefusesNamelessIdentities(t *testing.T) {
	const token, nameless = "token-of-east-0123456789", "token-of-nobody-0123456789"
	a := &Authenticator{Tokens: map[string]Identity{
		token:    {Name: "east", Role: RoleCluster},
		nameless: {Role: RoleAdmin},
	}}
	withCert := func(name, org string) context.Context {
		cert := &x509.Certificate{Subject: pkix.Name{CommonName: name, Organization: []string{org}}}
		return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}})
	}
	withToken := func(t string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+t))
	}
	tests := []struct {
		name string
		ctx  context.Context
		want Identity
		code codes.Code
	}{
		{"administrator's certificate", withCert("ops", keys.OrganizationAdmins), Identity{Name: "ops", Role: RoleAdmin}, codes.OK},
		{"cluster's certificate", withCert("east", keys.OrganizationClusters), Identity{Name: "east", Role: RoleCluster}, codes.OK},
		{"administrator's certificate without a name", withCert("", keys.OrganizationAdmins), Identity{}, codes.Unauthenticated},
		{"cluster's certificate without a name", withCert("", keys.OrganizationClusters), Identity{}, codes.Unauthenticated},
		{"a named token", withToken(token), Identity{Name: "east", Role: RoleCluster}, codes.OK},
		{"a token without a name", withToken(nameless), Identity{}, codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Authenticate(tt.ctx)
			if status.Code(err) != tt.code || got != tt.want {
				t.Errorf("Authenticate = %v, %v; want %v, %s", got, err, tt.want, tt.code)
			}
		})
	}
}
