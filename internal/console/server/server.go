// Package server is fleetnet-console's HTTP side: the web UI's embedded
// assets, a read-only JSON API of the model's views, and a stream of
// server-sent events that tells open pages when the model changed, so that
// they fetch their view again without a reload.
//
// Everything but the static assets needs an identity (see Authenticator).
// A browser logs in once with a URL that carries a token (?token=, as
// Jupyter does); the token is exchanged for a session cookie and the
// browser is sent to the same page without it, so the token leaves the
// address bar and the history.
package server

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/internal/console/model"
	"github.com/fleetnet/fleetnet/internal/console/web"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Config configures a Server.
type Config struct {
	Model *model.Model
	Auth  *Authenticator
	Log   *slog.Logger
	// SecureCookies marks the session cookie Secure (served over TLS).
	SecureCookies bool
	// Coalesce is the shortest time between two change events of one
	// stream; zero is 250ms. Heartbeat is how long a stream stays silent
	// before a comment keeps it open; zero is 15s.
	Coalesce, Heartbeat time.Duration
	// MaxStreams bounds the open event streams; zero is 256.
	// MaxStreamsPerSession bounds those of one session (or token, or
	// certificate); zero is DefaultMaxStreamsPerSession.
	MaxStreams, MaxStreamsPerSession int
	// Registerer receives the server's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// DefaultMaxStreamsPerSession is how many pages of one session may update
// live at once: tabs of one browser.
const DefaultMaxStreamsPerSession = 16

// Server serves the console.
type Server struct {
	cfg    Config
	static http.Handler
	stop   chan struct{}
	once   sync.Once

	mu      sync.Mutex
	streams int
	// held counts the open streams by holder (Identity.holder).
	held map[string]int

	streamsGauge   prometheus.Gauge
	streamsRefused *prometheus.CounterVec
	requests       *prometheus.CounterVec
}

// New returns a server.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = 250 * time.Millisecond
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 256
	}
	if cfg.MaxStreamsPerSession <= 0 {
		cfg.MaxStreamsPerSession = DefaultMaxStreamsPerSession
	}
	assets, _ := fs.Sub(web.Assets, "assets")
	s := &Server{
		cfg: cfg, static: http.FileServerFS(assets), stop: make(chan struct{}), held: map[string]int{},
		streamsGauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetnet_console_event_streams", Help: "Open event streams (pages that update live)."}),
		streamsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetnet_console_event_streams_refused_total", Help: "Event streams refused because their session, or the console, held as many as it may."},
			[]string{"limit"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetnet_console_api_requests_total", Help: "API requests by view and HTTP status code."},
			[]string{"view", "code"}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(s.streamsGauge, s.streamsRefused, s.requests)
	}
	return s
}

// Stop ends the event streams (before an HTTP server's Shutdown, which
// waits for them).
func (s *Server) Stop() { s.once.Do(func() { close(s.stop) }) }

// Handler is the console's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.Handle("GET /static/", http.StripPrefix("/static", s.static))
	mux.HandleFunc("GET /api/fleet", s.api("fleet", func(*http.Request) (any, error) { return s.cfg.Model.Fleet(), nil }))
	mux.HandleFunc("GET /api/services", s.api("services", s.services))
	mux.HandleFunc("GET /api/services/{namespace}/{name}", s.api("service", s.service))
	mux.HandleFunc("GET /api/entrypoints", s.api("entrypoints", func(*http.Request) (any, error) { return s.cfg.Model.EntryPoints(), nil }))
	mux.HandleFunc("GET /api/events", s.events)
	return headers(mux)
}

// headers adds the security headers every answer carries. The policy
// allows only the console's own scripts and styles; no-referrer keeps a
// login URL's token from leaking to a linked site.
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// index serves the page, or logs a browser in with ?token=.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if t := r.URL.Query().Get("token"); t != "" {
		name, ok := s.cfg.Auth.token(t)
		if !ok {
			s.cfg.Log.Info("console login refused: unknown token", "remote", r.RemoteAddr)
			s.page(w, http.StatusUnauthorized, "unauthorized.html")
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: SessionCookie, Value: s.cfg.Auth.login(name, t), Path: "/", HttpOnly: true,
			Secure: s.cfg.SecureCookies, SameSite: http.SameSiteStrictMode, MaxAge: int(s.cfg.Auth.ttl.Seconds()),
		})
		s.cfg.Log.Info("console login", "name", name, "remote", r.RemoteAddr)
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if _, refused := s.cfg.Auth.Identify(r); refused != nil {
		if refused.Code == http.StatusForbidden {
			s.cfg.Log.Info("console refused", "reason", refused.Reason, "remote", r.RemoteAddr)
			http.Error(w, refused.Reason, refused.Code)
			return
		}
		s.page(w, http.StatusUnauthorized, "unauthorized.html")
		return
	}
	s.page(w, http.StatusOK, "index.html")
}

func (s *Server) page(w http.ResponseWriter, code int, name string) {
	b, err := fs.ReadFile(web.Assets, "assets/"+name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// apiError is an API error's body.
type apiError struct {
	Error string `json:"error"`
}

// badRequest is an error of the request itself (400).
type badRequest struct{ error }

// api serves a view as JSON to an identified caller.
func (s *Server) api(view string, get func(*http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusOK
		var body any
		if _, refused := s.cfg.Auth.Identify(r); refused != nil {
			code, body = refused.Code, apiError{refused.Reason}
			if refused.Code == http.StatusUnauthorized {
				body = apiError{refused.Reason + ": open the console's URL with its login token (fleetnetctl dev status prints it), or send Authorization: Bearer <token>"}
			}
		} else if v, err := get(r); err != nil {
			code, body = http.StatusInternalServerError, apiError{err.Error()}
			if errors.As(err, new(badRequest)) {
				code = http.StatusBadRequest
			}
		} else {
			body = v
		}
		s.requests.WithLabelValues(view, strconv.Itoa(code)).Inc()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	}
}

func (s *Server) services(r *http.Request) (any, error) {
	q := r.URL.Query()
	offset, limit := 0, 50
	for _, p := range []struct {
		name string
		dst  *int
		max  int
	}{{"offset", &offset, 1 << 30}, {"limit", &limit, model.MaxPage}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > p.max {
			return nil, badRequest{errors.New(p.name + "=" + strconv.Quote(v) + ": want a whole number from 0 to " + strconv.Itoa(p.max))}
		}
		*p.dst = n
	}
	page, err := s.cfg.Model.Services(q.Get("q"), offset, limit)
	if err != nil {
		return nil, badRequest{err}
	}
	return page, nil
}

func (s *Server) service(r *http.Request) (any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	for _, p := range []struct{ field, value string }{{"namespace", ns}, {"name", name}} {
		if msgs := validation.IsDNS1123Label(p.value); len(msgs) > 0 {
			return nil, badRequest{errors.New(p.field + " " + strconv.Quote(p.value) + ": " + strings.Join(msgs, "; "))}
		}
	}
	return s.cfg.Model.ServiceDetail(model.Service{Namespace: ns, Name: name}), nil
}

// events streams "change" events carrying the model's revision: one at
// once, then one after each change, at most one per Coalesce. A stream
// ends when its caller may no longer look (a session whose token left the
// tokens file). Streams are capped per session (or token, or certificate)
// and in all; a refusal is counted by the limit that refused it.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id, refused := s.cfg.Auth.Identify(r)
	if refused != nil {
		http.Error(w, refused.Reason, refused.Code)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	switch {
	case s.held[id.holder] >= s.cfg.MaxStreamsPerSession:
		s.mu.Unlock()
		s.streamsRefused.WithLabelValues("session").Inc()
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many open pages of this session ("+strconv.Itoa(s.cfg.MaxStreamsPerSession)+"); close some", http.StatusTooManyRequests)
		return
	case s.streams >= s.cfg.MaxStreams:
		s.mu.Unlock()
		s.streamsRefused.WithLabelValues("total").Inc()
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many open pages; try again", http.StatusServiceUnavailable)
		return
	}
	s.streams++
	s.held[id.holder]++
	s.streamsGauge.Inc()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.streams--
		if s.held[id.holder]--; s.held[id.holder] <= 0 {
			delete(s.held, id.holder)
		}
		s.streamsGauge.Dec()
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// retry: how long a browser waits before it opens a broken stream again.
	if _, err := w.Write([]byte("retry: 2000\n\n")); err != nil {
		return
	}
	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	var sent uint64
	first := true
	for {
		tokens := s.cfg.Auth.tokensChanged()
		if _, refused := s.cfg.Auth.Identify(r); refused != nil {
			return
		}
		rev, wake := s.cfg.Model.Revision()
		if first || rev != sent {
			if _, err := w.Write([]byte("event: change\ndata: " + strconv.FormatUint(rev, 10) + "\n\n")); err != nil {
				return
			}
			flusher.Flush()
			sent, first = rev, false
			select {
			case <-time.After(s.cfg.Coalesce):
			case <-r.Context().Done():
				return
			case <-s.stop:
				return
			}
			continue
		}
		select {
		case <-wake:
		case <-tokens:
		case <-heartbeat.C:
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return
			}
			flusher.Flush()
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
	}
}

// Probes serves /healthz (the process runs) and /readyz (the registry's
// picture is in).
func (s *Server) Probes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		f := s.cfg.Model.Feeds()[model.FeedRegistry]
		if !f.Synced {
			http.Error(w, "waiting for the registry's first snapshot "+f.Error, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
