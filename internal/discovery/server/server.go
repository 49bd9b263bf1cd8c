// Package server is fleetnet-discovery's HTTP API under /v1/ (documented
// by api/discovery/v1's openapi.yaml): pools, routers, registrations and
// the watch, with authentication, metrics and probes. It reads the store
// and asks the pool source only for what the store does not hold: router
// replicas, readiness and, when the source takes them, registrations.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Backend is what the server needs from the pool source besides the store.
type Backend interface {
	// Routers returns the router replicas, sorted by cluster and instance
	// id.
	Routers() []discoveryv1.Router
	// Synced is closed once the source has loaded its state: before that,
	// watches wait and lists say synced=false.
	Synced() <-chan struct{}
	// Status says, for /readyz, what the source is waiting for or holds.
	Status() string
}

// ScopeBlind is implemented by pool sources that cannot tell which
// clusters may see a pool (the kubernetes source: one cluster's imports
// carry no export's scope). The server refuses callers that are clusters
// with 403 and ClusterRefusal's reason, rather than show them what another
// cluster was sent.
type ScopeBlind interface {
	ClusterRefusal() string
}

// ErrTooManyRegistrations is what a Registrar's error wraps when the
// caller already holds as many live registrations as one identity may
// (429).
var ErrTooManyRegistrations = errors.New("too many registrations")

// Registrar is implemented by pool sources that take registrations (the
// memory source). Invalid input gives a *discoveryv1.Error; an unknown or
// expired registration an error wrapping fs.ErrNotExist; a registration
// beyond what one owner (the caller's identity) may hold an error wrapping
// ErrTooManyRegistrations.
type Registrar interface {
	Register(ctx context.Context, owner string, reg discoveryv1.Registration) (discoveryv1.Lease, error)
	Renew(ctx context.Context, id string, reg *discoveryv1.Registration) (discoveryv1.Lease, error)
	Deregister(ctx context.Context, id string) error
}

// Config configures a Server.
type Config struct {
	Store   *store.Store
	Backend Backend
	// Registrar takes registrations; nil answers them 501, naming
	// SourceName.
	Registrar  Registrar
	SourceName string
	Auth       *Authenticator
	Log        *slog.Logger
	// Registerer receives the server's metrics; nil registers none.
	Registerer prometheus.Registerer
	// BookmarkInterval is how long a watch stays silent before it gets a
	// bookmark; zero is 30s.
	BookmarkInterval time.Duration
	// WriteTimeout bounds each write to a watch stream, so that a client
	// that stopped reading does not hold its connection forever; zero is
	// 30s.
	WriteTimeout time.Duration
}

// Server serves the API.
type Server struct {
	cfg      Config
	mux      *http.ServeMux
	metrics  *metrics
	stopping chan struct{}
	// refuseClusters, when set, is why callers that are clusters are
	// refused (see ScopeBlind).
	refuseClusters string
}

// maxBody bounds a registration's body: MaxEndpoints endpoints with room.
const maxBody = 4 << 20

// New returns a server.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Auth == nil {
		cfg.Auth = &Authenticator{}
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), stopping: make(chan struct{})}
	s.metrics = newMetrics(cfg.Registerer, cfg.Store)
	if sb, ok := cfg.Backend.(ScopeBlind); ok {
		s.refuseClusters = sb.ClusterRefusal()
	}
	s.mux.HandleFunc("GET /v1/openapi.yaml", s.openAPI)
	s.mux.HandleFunc("GET /v1/pools", s.authorized(RoleRead, s.listPools))
	s.mux.HandleFunc("GET /v1/pools/{namespace}/{name}", s.authorized(RoleRead, s.getPool))
	s.mux.HandleFunc("GET /v1/routers", s.authorized(RoleRead, s.listRouters))
	s.mux.HandleFunc("GET /v1/watch", s.authorized(RoleRead, s.watch))
	s.mux.HandleFunc("POST /v1/registrations", s.authorized(RoleRegister, s.register))
	s.mux.HandleFunc("PUT /v1/registrations/{id}", s.authorized(RoleRegister, s.renew))
	s.mux.HandleFunc("DELETE /v1/registrations/{id}", s.authorized(RoleRegister, s.deregister))
	return s
}

// Handler returns the API's handler.
func (s *Server) Handler() http.Handler { return s.metrics.instrument(s.mux) }

// Stop ends every watch stream, so that an http.Server's Shutdown does not
// wait for them; clients resume elsewhere or after the restart.
func (s *Server) Stop() {
	select {
	case <-s.stopping:
	default:
		close(s.stopping)
	}
}

// Probes returns /healthz (the process serves) and /readyz (the pool source
// is synced).
func (s *Server) Probes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		status := s.cfg.Backend.Status()
		if !isClosed(s.cfg.Backend.Synced()) {
			http.Error(w, status, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok:", status)
	})
	return mux
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// authorized authenticates the caller, requires role, and hands the
// handler the caller's identity.
func (s *Server) authorized(role Role, h func(http.ResponseWriter, *http.Request, Identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := s.cfg.Auth.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fleetnet-discovery"`)
			writeJSON(w, http.StatusUnauthorized, err)
			return
		}
		if id.Role < role {
			writeJSON(w, http.StatusForbidden, &discoveryv1.Error{Message: fmt.Sprintf("%s may not %s %s: the role %s is needed", id, r.Method, r.URL.Path, role)})
			return
		}
		if id.Cluster != "" && s.refuseClusters != "" {
			writeJSON(w, http.StatusForbidden, &discoveryv1.Error{Message: fmt.Sprintf("%s may not %s %s: %s", id, r.Method, r.URL.Path, s.refuseClusters)})
			return
		}
		h(w, r, id)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The client may be gone; nothing is left to do about it.
	_ = json.NewEncoder(w).Encode(v)
}

func badRequest(w http.ResponseWriter, field, value, msg string) {
	writeJSON(w, http.StatusBadRequest, &discoveryv1.Error{Field: field, Value: value, Message: msg})
}

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(discoveryv1.OpenAPI)
}

// query returns the request's query after checking that it names only
// known parameters, each once: a misspelt filter is an error rather than a
// silently unfiltered answer.
func query(r *http.Request, known ...string) (url.Values, *discoveryv1.Error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &discoveryv1.Error{Field: "query", Value: r.URL.RawQuery, Message: err.Error()}
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(known, k) {
			return nil, &discoveryv1.Error{Field: k, Value: q.Get(k), Message: "unknown query parameter; known: " + strings.Join(known, ", ")}
		}
		if len(q[k]) > 1 {
			return nil, &discoveryv1.Error{Field: k, Value: strings.Join(q[k], ","), Message: "given more than once"}
		}
	}
	return q, nil
}

// filters are the pool filters common to list and watch.
type filters struct {
	namespace string
	selector  labels.Selector
	region    string
}

func parseFilters(q url.Values) (filters, *discoveryv1.Error) {
	f := filters{namespace: q.Get("namespace"), region: q.Get("region"), selector: labels.Everything()}
	if f.namespace != "" {
		if msgs := validation.IsDNS1123Label(f.namespace); len(msgs) > 0 {
			return f, &discoveryv1.Error{Field: "namespace", Value: f.namespace, Message: msgs[0]}
		}
	}
	if v := q.Get("labelSelector"); v != "" {
		sel, err := labels.Parse(v)
		if err != nil {
			return f, &discoveryv1.Error{Field: "labelSelector", Value: v, Message: err.Error()}
		}
		f.selector = sel
	}
	if msgs := validation.IsValidLabelValue(f.region); len(msgs) > 0 {
		return f, &discoveryv1.Error{Field: "region", Value: f.region, Message: msgs[0]}
	}
	return f, nil
}

// inRegion returns p with only the clusters of region, or nil when it has
// none; an empty region keeps p.
func inRegion(p *discoveryv1.Pool, region string) *discoveryv1.Pool {
	if region == "" {
		return p
	}
	cp := *p
	cp.Clusters = nil
	for _, c := range p.Clusters {
		if c.Region == region {
			cp.Clusters = append(cp.Clusters, c)
		}
	}
	if len(cp.Clusters) == 0 {
		return nil
	}
	return &cp
}

func (s *Server) listPools(w http.ResponseWriter, r *http.Request, id Identity) {
	q, qerr := query(r, "namespace", "labelSelector", "region")
	if qerr != nil {
		writeJSON(w, http.StatusBadRequest, qerr)
		return
	}
	f, ferr := parseFilters(q)
	if ferr != nil {
		writeJSON(w, http.StatusBadRequest, ferr)
		return
	}
	rev, pools := s.cfg.Store.ListFor(id.viewer(), func(p *discoveryv1.Pool) bool {
		return (f.namespace == "" || p.Namespace == f.namespace) && f.selector.Matches(labels.Set(p.Labels))
	})
	out := discoveryv1.PoolList{Revision: rev, Synced: isClosed(s.cfg.Backend.Synced()), Pools: make([]discoveryv1.Pool, 0, len(pools))}
	for _, p := range pools {
		if p = inRegion(p, f.region); p != nil {
			out.Pools = append(out.Pools, *p)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getPool(w http.ResponseWriter, r *http.Request, id Identity) {
	q, qerr := query(r, "region")
	if qerr != nil {
		writeJSON(w, http.StatusBadRequest, qerr)
		return
	}
	f, ferr := parseFilters(q)
	if ferr != nil {
		writeJSON(w, http.StatusBadRequest, ferr)
		return
	}
	k := store.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	// A pool the caller may not see is not found, as one that does not
	// exist: its name is not confirmed either.
	p, ok := s.cfg.Store.GetFor(id.viewer(), k)
	if ok {
		if p = inRegion(p, f.region); p == nil {
			writeJSON(w, http.StatusNotFound, &discoveryv1.Error{Field: "region", Value: f.region, Message: fmt.Sprintf("pool %s has no cluster in this region", k)})
			return
		}
	} else {
		writeJSON(w, http.StatusNotFound, &discoveryv1.Error{Field: "pool", Value: k.String(), Message: "no such pool"})
		return
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(p.Revision, 10)))
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) listRouters(w http.ResponseWriter, _ *http.Request, _ Identity) {
	routers := s.cfg.Backend.Routers()
	if routers == nil {
		routers = []discoveryv1.Router{}
	}
	writeJSON(w, http.StatusOK, discoveryv1.RouterList{Routers: routers})
}

func (s *Server) registrar(w http.ResponseWriter) Registrar {
	if s.cfg.Registrar == nil {
		writeJSON(w, http.StatusNotImplemented, &discoveryv1.Error{Message: fmt.Sprintf(
			"this server reads its pools from %q, which takes no registrations; registrations need --pool-source=memory", s.cfg.SourceName)})
	}
	return s.cfg.Registrar
}

// decodeRegistration reads a registration body; an empty body is nil when
// optional.
func decodeRegistration(w http.ResponseWriter, r *http.Request, optional bool) (*discoveryv1.Registration, *discoveryv1.Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return nil, &discoveryv1.Error{Field: "body", Message: err.Error()}
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if optional {
			return nil, nil
		}
		return nil, &discoveryv1.Error{Field: "body", Message: "a registration (JSON) is required"}
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	var reg discoveryv1.Registration
	if err := dec.Decode(&reg); err != nil {
		return nil, jsonError(err)
	}
	if dec.More() {
		return nil, &discoveryv1.Error{Field: "body", Message: "more than one JSON value"}
	}
	return &reg, nil
}

// jsonError names the field a decoding error is about.
func jsonError(err error) *discoveryv1.Error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return &discoveryv1.Error{Field: typeErr.Field, Value: typeErr.Value, Message: "must be " + typeErr.Type.String()}
	case errors.As(err, &syntaxErr):
		return &discoveryv1.Error{Field: "body", Value: strconv.FormatInt(syntaxErr.Offset, 10), Message: "not JSON at this offset: " + syntaxErr.Error()}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &discoveryv1.Error{Field: strings.Trim(name, `"`), Message: "unknown field"}
	}
	return &discoveryv1.Error{Field: "body", Message: err.Error()}
}

// registrationError answers an error of the Registrar.
func (s *Server) registrationError(w http.ResponseWriter, r *http.Request, err error) {
	var fe *discoveryv1.Error
	switch {
	case errors.As(err, &fe):
		writeJSON(w, http.StatusBadRequest, fe)
	case errors.Is(err, ErrTooManyRegistrations):
		writeJSON(w, http.StatusTooManyRequests, &discoveryv1.Error{Message: err.Error()})
	case errors.Is(err, fs.ErrNotExist):
		writeJSON(w, http.StatusNotFound, &discoveryv1.Error{Field: "id", Value: r.PathValue("id"), Message: "no such registration: it expired or was deregistered; register again"})
	default:
		s.cfg.Log.Error("registration failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, &discoveryv1.Error{Message: err.Error()})
	}
}

func (s *Server) register(w http.ResponseWriter, r *http.Request, id Identity) {
	reg := s.registrar(w)
	if reg == nil {
		return
	}
	body, derr := decodeRegistration(w, r, false)
	if derr != nil {
		writeJSON(w, http.StatusBadRequest, derr)
		return
	}
	lease, err := reg.Register(r.Context(), id.owner(), *body)
	if err != nil {
		s.registrationError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/registrations/"+lease.ID)
	writeJSON(w, http.StatusCreated, lease)
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request, _ Identity) {
	reg := s.registrar(w)
	if reg == nil {
		return
	}
	body, derr := decodeRegistration(w, r, true)
	if derr != nil {
		writeJSON(w, http.StatusBadRequest, derr)
		return
	}
	lease, err := reg.Renew(r.Context(), r.PathValue("id"), body)
	if err != nil {
		s.registrationError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, lease)
}

func (s *Server) deregister(w http.ResponseWriter, r *http.Request, _ Identity) {
	reg := s.registrar(w)
	if reg == nil {
		return
	}
	if err := reg.Deregister(r.Context(), r.PathValue("id")); err != nil {
		s.registrationError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
