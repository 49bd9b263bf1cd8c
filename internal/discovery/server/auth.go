package server

import (
	"crypto/subtle"
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/api/keys"
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

// Identity is an authenticated caller.
type Identity struct {
	Name string
	Role Role
	// Via says how the caller authenticated: "token" or "certificate".
	Via string
}

func (i Identity) String() string { return fmt.Sprintf("%s %q (role %s)", i.Via, i.Name, i.Role) }

// Authenticator finds who is calling: a bearer token of Tokens, or else a
// client certificate that the TLS handshake verified against the fleet CA
// (the server's tls.Config decides which certificates are verified).
type Authenticator struct {
	// Tokens maps bearer tokens to identities; nil accepts no token.
	Tokens map[string]Identity
}

// Authenticate returns the caller's identity, or a 401 error.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, *discoveryv1.Error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			// The value is not echoed: it may be a secret.
			return Identity{}, &discoveryv1.Error{Field: "Authorization", Message: "expected a bearer token (Authorization: Bearer <token>)"}
		}
		for known, id := range a.Tokens {
			if subtle.ConstantTimeCompare([]byte(known), []byte(token)) == 1 {
				return id, nil
			}
		}
		return Identity{}, &discoveryv1.Error{Field: "Authorization", Message: "bearer token is not known"}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		return Identity{Name: cert.Subject.CommonName, Role: roleOf(cert.Subject.Organization), Via: "certificate"}, nil
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

// LoadTokens reads a tokens file: CSV lines of token,name,role where role
// is "read" or "register" (which includes read); lines starting with # are
// comments. The format is the registry's --token-file's, with these roles.
func LoadTokens(path string) (map[string]Identity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading tokens file: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = 3
	r.Comment = '#'
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parsing tokens file %s: %w", path, err)
	}
	out := map[string]Identity{}
	for i, row := range rows {
		var role Role
		switch row[2] {
		case discoveryv1.RoleRead:
			role = RoleRead
		case discoveryv1.RoleRegister:
			role = RoleRegister
		default:
			return nil, fmt.Errorf("tokens file %s, entry %d (%s): role %q is neither %q nor %q", path, i+1, row[1], row[2], discoveryv1.RoleRead, discoveryv1.RoleRegister)
		}
		if len(row[0]) < 16 {
			return nil, fmt.Errorf("tokens file %s, entry %d (%s): token shorter than 16 characters", path, i+1, row[1])
		}
		if _, dup := out[row[0]]; dup {
			return nil, fmt.Errorf("tokens file %s, entry %d (%s): the token is given twice", path, i+1, row[1])
		}
		out[row[0]] = Identity{Name: row[1], Role: role, Via: "token"}
	}
	return out, nil
}
