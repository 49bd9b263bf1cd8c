package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
)

// RoleRead is the one role of the console's tokens file: the console is
// read-only.
const RoleRead = "read"

// SessionCookie holds a browser's session once it logged in with a token.
const SessionCookie = "fleetnet-console-session"

// DefaultSessionTTL is how long a session lasts.
const DefaultSessionTTL = 12 * time.Hour

// maxSessions bounds the sessions held, so that logins can't grow memory
// without end; the oldest goes first.
const maxSessions = 10000

// Authenticator decides who may look: a bearer token or a login token of
// the tokens file, a session made by a login (while its token is in the
// file), or a client certificate the TLS handshake verified against the
// fleet CA that names the console's organization (keys.OrganizationConsole)
// or an administrator's (keys.OrganizationAdmins). The console shows the
// administrators' view of the fleet: a member cluster's or an edge's
// certificate, which the same CA signs, is refused.
type Authenticator struct {
	mu       sync.RWMutex
	tokens   map[string]string // token → name
	sessions map[string]session
	// changed is closed, and replaced, when the tokens change: open event
	// streams look again at whether their session still holds.
	changed chan struct{}
	ttl     time.Duration
	now     func() time.Time
}

type session struct {
	name string
	// token opened the session; it ends when the token leaves the file.
	token   string
	expires time.Time
}

// Identity is a caller that may look.
type Identity struct {
	Name string
	// Via is "token", "session" or "certificate".
	Via string
	// holder names what the caller's event streams count against: its
	// session, or its token's or certificate's name.
	holder string
}

// Refusal is why a caller may not look: Code is 401 (no credentials, or
// ones the console does not know) or 403 (a certificate of the fleet CA
// that is not for the console).
type Refusal struct {
	Code   int
	Reason string
}

// NewAuthenticator returns an authenticator with sessions of ttl (zero is
// DefaultSessionTTL).
func NewAuthenticator(ttl time.Duration) *Authenticator {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &Authenticator{tokens: map[string]string{}, sessions: map[string]session{}, changed: make(chan struct{}), ttl: ttl, now: time.Now}
}

// SetTokens puts a tokens file's entries in use. The sessions that a token
// no longer in the file opened end now, and so do their event streams.
// An entry without a name (tokenfile refuses them) is left out.
func (a *Authenticator) SetTokens(entries []tokenfile.Entry) {
	tokens := make(map[string]string, len(entries))
	for _, e := range entries {
		if strings.TrimSpace(e.Name) != "" {
			tokens[e.Token] = e.Name
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens = tokens
	for id, s := range a.sessions {
		if _, ok := tokens[s.token]; !ok {
			delete(a.sessions, id)
		}
	}
	close(a.changed)
	a.changed = make(chan struct{})
}

// tokensChanged is closed at the next SetTokens.
func (a *Authenticator) tokensChanged() <-chan struct{} {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.changed
}

// token returns the name of a known token.
func (a *Authenticator) token(t string) (string, bool) {
	if t == "" {
		return "", false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.tokenLocked(t)
}

func (a *Authenticator) tokenLocked(t string) (string, bool) {
	for known, name := range a.tokens {
		if subtle.ConstantTimeCompare([]byte(known), []byte(t)) == 1 {
			return name, true
		}
	}
	return "", false
}

// login makes a session for the holder of token and returns its id.
func (a *Authenticator) login(name, token string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if len(a.sessions) >= maxSessions {
		var oldest string
		var at time.Time
		for k, s := range a.sessions {
			if s.expires.Before(now) {
				delete(a.sessions, k)
				continue
			}
			if oldest == "" || s.expires.Before(at) {
				oldest, at = k, s.expires
			}
		}
		if len(a.sessions) >= maxSessions {
			delete(a.sessions, oldest)
		}
	}
	a.sessions[id] = session{name: name, token: token, expires: now.Add(a.ttl)}
	return id
}

// session returns the name of a live session whose token is still in use.
func (a *Authenticator) session(id string) (string, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	s, ok := a.sessions[id]
	if !ok || !a.now().Before(s.expires) {
		return "", false
	}
	// SetTokens ends the sessions of a token it drops; this holds should
	// a session outlive its token another way.
	name, ok := a.tokenLocked(s.token)
	return name, ok
}

// Identify returns who calls, or why they may not look.
func (a *Authenticator) Identify(r *http.Request) (Identity, *Refusal) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") {
			if name, ok := a.token(t); ok {
				return Identity{Name: name, Via: "token", holder: "token:" + name}, nil
			}
		}
		return Identity{}, &Refusal{http.StatusUnauthorized, "the bearer token is not one of the console's"}
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if name, ok := a.session(c.Value); ok {
			return Identity{Name: name, Via: "session", holder: "session:" + c.Value}, nil
		}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		name, orgs := cert.Subject.CommonName, cert.Subject.Organization
		switch {
		case name == "":
			return Identity{}, &Refusal{http.StatusUnauthorized, fmt.Sprintf("the client certificate of organization %v has an empty common name: an identity needs a name", orgs)}
		case slices.Contains(orgs, keys.OrganizationConsole), slices.Contains(orgs, keys.OrganizationAdmins):
			return Identity{Name: name, Via: "certificate", holder: "certificate:" + name}, nil
		}
		return Identity{}, &Refusal{http.StatusForbidden, fmt.Sprintf("the client certificate %q of organization %v may not look: the console shows the administrators' view of the fleet, to certificates of organization %s or %s (a member cluster's or an edge's is not one), or a token of its tokens file",
			name, orgs, keys.OrganizationConsole, keys.OrganizationAdmins)}
	}
	return Identity{}, &Refusal{http.StatusUnauthorized, "not logged in"}
}
