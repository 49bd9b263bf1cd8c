package server

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
)

// Role is what a caller may do; a higher role includes the lower ones.
type Role int

// Roles.
const (
	// RoleNone: authenticated (a certificate of the fleet CA) but given no
	// role; every /v1/ call but the OpenAPI document is forbidden.
	RoleNone Role = iota
	// RoleRead may list and get pools and routers, and watch.
	RoleRead
	// RoleRegister may also register, renew and deregister.
	RoleRegister
)

func (r Role) String() string {
	switch r {
	case RoleRead:
		return discoveryv1.RoleRead
	case RoleRegister:
		return discoveryv1.RoleRegister
	}
	return "none"
}

// Identity is an authenticated caller; its name is never empty.
type Identity struct {
	Name string
	Role Role
	// Via says how the caller authenticated: "token" or "certificate".
	Via string
	// Cluster is set for a member cluster's certificate
	// (keys.OrganizationClusters without keys.OrganizationAdmins): the
	// cluster it names, which sees the pools the registry would send it
	// and no other (store.ClusterViewer). Every other identity sees every
	// pool its role may read.
	Cluster string
}

func (i Identity) String() string {
	if i.Cluster != "" {
		return fmt.Sprintf("%s of cluster %q (role %s)", i.Via, i.Cluster, i.Role)
	}
	return fmt.Sprintf("%s %q (role %s)", i.Via, i.Name, i.Role)
}

// viewer is who the caller is to the store.
func (i Identity) viewer() store.Viewer {
	if i.Cluster != "" {
		return store.ClusterViewer(i.Cluster)
	}
	return store.EveryPool()
}

// owner names the caller as the holder of registrations (one identity's
// are capped): a token and a certificate of one name are two holders.
func (i Identity) owner() string { return i.Via + ":" + i.Name }

// Authenticator finds who is calling: a bearer token of Tokens, or else a
// client certificate that the TLS handshake verified against the fleet CA
// (the server's tls.Config decides which certificates are verified).
type Authenticator struct {
	// Tokens maps bearer tokens to identities; nil accepts no token. Set
	// it before serving, and with SetTokens afterwards.
	Tokens map[string]Identity
	mu     sync.RWMutex
}

// SetTokens replaces the tokens (a reloaded tokens file).
func (a *Authenticator) SetTokens(tokens map[string]Identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Tokens = tokens
}

// Authenticate returns the caller's identity, or a 401 error.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, *discoveryv1.Error) {
	a.mu.RLock()
	tokens := a.Tokens
	a.mu.RUnlock()
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			// The value is not echoed: it may be a secret.
			return Identity{}, &discoveryv1.Error{Field: "Authorization", Message: "expected a bearer token (Authorization: Bearer <token>)"}
		}
		for known, id := range tokens {
			if subtle.ConstantTimeCompare([]byte(known), []byte(token)) == 1 {
				if id.Name == "" {
					// LoadTokens refuses such a line; a map set by hand
					// may hold one. No identity is nameless.
					return Identity{}, &discoveryv1.Error{Field: "Authorization", Message: "bearer token has no name"}
				}
				return id, nil
			}
		}
		return Identity{}, &discoveryv1.Error{Field: "Authorization", Message: "bearer token is not known"}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		name, orgs := cert.Subject.CommonName, cert.Subject.Organization
		if name == "" {
			return Identity{}, &discoveryv1.Error{Message: fmt.Sprintf("client certificate of organization %v has an empty common name: an identity needs a name", orgs)}
		}
		id := Identity{Name: name, Role: roleOf(orgs), Via: "certificate"}
		if slices.Contains(orgs, keys.OrganizationClusters) && !slices.Contains(orgs, keys.OrganizationAdmins) {
			id.Cluster = name
		}
		return id, nil
	}
	return Identity{}, &discoveryv1.Error{Message: "a bearer token, or a client certificate signed by the fleet CA, is required"}
}

// roleOf maps a certificate's organizations to the highest role they give.
func roleOf(orgs []string) Role {
	switch {
	case slices.Contains(orgs, discoveryv1.OrganizationRegister), slices.Contains(orgs, keys.OrganizationAdmins):
		return RoleRegister
	case slices.Contains(orgs, discoveryv1.OrganizationRead), slices.Contains(orgs, keys.OrganizationClusters):
		return RoleRead
	}
	return RoleNone
}

// LoadTokens reads a tokens file (internal/tokenfile: CSV lines of
// token,name,role, # comments) whose roles are "read" or "register" (which
// includes read). The format is the registry's --token-file's, with these
// roles. A token's identity sees every pool (it is no cluster's).
func LoadTokens(path string) (map[string]Identity, error) {
	entries, err := tokenfile.Load(path, discoveryv1.RoleRead, discoveryv1.RoleRegister)
	if err != nil {
		return nil, err
	}
	out := map[string]Identity{}
	for _, e := range entries {
		role := RoleRead
		if e.Role == discoveryv1.RoleRegister {
			role = RoleRegister
		}
		out[e.Token] = Identity{Name: e.Name, Role: role, Via: "token"}
	}
	return out, nil
}
