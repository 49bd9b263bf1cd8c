// Package client connects to the registry with the fleet's credentials.
package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/pki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
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
	// Address is host:port of the registry.
	Address string
	// CAFile is the CA bundle that signed the registry's certificate.
	CAFile string
	// CertFile and KeyFile are our client certificate (mTLS).
	CertFile, KeyFile string
	// Token is a bearer token, the alternative to a client certificate.
	Token string
	// TokenFile holds a bearer token instead of Token; it is read at each
	// call, so that a rotated token (a Secret's file) is used at once.
	TokenFile string
	// DialOptions are added to the connection's options.
	DialOptions []grpc.DialOption
}

// Dial connects to the registry. The connection is lazy: errors of the
// network show up in calls, as Unavailable.
func Dial(o Options) (registryv1.RegistryClient, *grpc.ClientConn, error) {
	if o.Address == "" {
		return nil, nil, fmt.Errorf("no registry address given")
	}
	caPEM, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("reading registry CA: %w", err)
	}
	var cert *tls.Certificate
	if o.CertFile != "" {
		c, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("loading client certificate %s: %w", o.CertFile, err)
		}
		cert = &c
	}
	tlsCfg, err := pki.ClientTLS(caPEM, cert)
	if err != nil {
		return nil, nil, fmt.Errorf("registry CA %s: %w", o.CAFile, err)
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		// gRPC's default reconnect backoff grows to 120 s, and calls fail
		// fast until the next attempt: after a long registry outage the
		// agents would find it back only after their leases expired (seen
		// in the dev fleet). A connection attempt is cheap; keep them close.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: ReconnectBackoff, MinConnectTimeout: 5 * time.Second}),
	}, o.DialOptions...)
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
	conn, err := grpc.NewClient(o.Address, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("registry %s: %w", o.Address, err)
	}
	return registryv1.NewRegistryClient(conn), conn, nil
}

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
