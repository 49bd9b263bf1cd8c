package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"

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
// the tokens file, a session made by a login, or a client certificate the
// TLS handshake verified against the fleet CA.
type Authenticator struct {
	mu       sync.RWMutex
	tokens   map[string]string // token → name
	sessions map[string]session
	ttl      time.Duration
	now      func() time.Time
}

type session struct {
	name    string
	expires time.Time
}

// NewAuthenticator returns an authenticator with sessions of ttl (zero is
// DefaultSessionTTL).
func NewAuthenticator(ttl time.Duration) *Authenticator {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &Authenticator{tokens: map[string]string{}, sessions: map[string]session{}, ttl: ttl, now: time.Now}
}

// SetTokens puts a tokens file's entries in use.
func (a *Authenticator) SetTokens(entries []tokenfile.Entry) {
	tokens := make(map[string]string, len(entries))
	for _, e := range entries {
		tokens[e.Token] = e.Name
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens = tokens
}

// token returns the name of a known token.
func (a *Authenticator) token(t string) (string, bool) {
	if t == "" {
		return "", false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	for known, name := range a.tokens {
		if subtle.ConstantTimeCompare([]byte(known), []byte(t)) == 1 {
			return name, true
		}
	}
	return "", false
}

// login makes a session for name and returns its id.
func (a *Authenticator) login(name string) string {
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
	a.sessions[id] = session{name: name, expires: now.Add(a.ttl)}
	return id
}

// session returns the name of a live session.
func (a *Authenticator) session(id string) (string, bool) {
	a.mu.RLock()
	s, ok := a.sessions[id]
	a.mu.RUnlock()
	if !ok || !a.now().Before(s.expires) {
		return "", false
	}
	return s.name, true
}

// Identify returns who calls, and how; ok is false for a stranger.
func (a *Authenticator) Identify(r *http.Request) (name, via string, ok bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") {
			if name, ok := a.token(t); ok {
				return name, "token", true
			}
		}
		return "", "", false
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if name, ok := a.session(c.Value); ok {
			return name, "session", true
		}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return r.TLS.VerifiedChains[0][0].Subject.CommonName, "certificate", true
	}
	return "", "", false
}
