// Package distribute serves the newest model to every fleetnet-edge over
// the fleetnet.edge.v1 stream and keeps what each edge acknowledged, so that
// its publisher can say exactly where provisioning stands: fleetnet-gateway
// for its edges, the agent for its cluster's east-west gateway.
//
// The model is level state: the server holds only the newest version, an
// edge that reconnects already serving it is sent nothing, and publishing
// the same content again makes no new version.
package distribute

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/api/skew"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// skewServer labels the edges refused for their version
// (fleetnet_version_refused_total).
const skewServer = "edge-model-stream"

// Server implements edgev1.ModelDistributionServer. An edge outside the
// version skew policy (api/skew) is refused at its Hello.
type Server struct {
	edgev1.UnimplementedModelDistributionServer

	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	current *edgev1.ModelUpdate // nil until the first Publish
	// changed is closed and replaced by every new version: a broadcast to
	// the edges' send loops that never blocks Publish on a slow edge.
	changed chan struct{}
	edges   map[string]*edge
	// statusChanged has a token when an edge connected, disconnected or
	// answered since the last read: the controller then rewrites status.
	statusChanged chan struct{}
}

// edge is what the server knows of one edge, by name.
type edge struct {
	region    string
	version   string // announced, skew.Unannounced for none
	stream    int    // generation of the stream that owns this entry
	connected bool
	// since is when the edge connected, or disconnected.
	since   time.Time
	serving int64
	hash    string
	// sentAt is when the newest version was sent to it, for "waiting since".
	sentAt time.Time
	// refused is the NACK of the newest version, if any.
	refused string
	// without are the parts of the version it serves that it serves
	// without (Ack.refused, Hello.refused).
	without []*edgev1.Refusal
}

// NewServer returns a server with no model yet.
func NewServer(log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{log: log, now: time.Now, changed: make(chan struct{}), edges: map[string]*edge{}, statusChanged: make(chan struct{}, 1)}
}

// Publish makes model, with the certificates its listeners present, the
// newest version and returns its number. The same content as the newest
// version is not a new version.
func (s *Server) Publish(contentType string, model []byte, certs []*edgev1.Certificate) int64 {
	h := sha256.New()
	h.Write(model)
	for _, c := range certs {
		// Lengths first, so that no two lists hash alike.
		for _, part := range [][]byte{[]byte(c.GetDigest()), c.GetCertPem(), c.GetKeyPem()} {
			fmt.Fprintf(h, "%d:", len(part))
			h.Write(part)
		}
	}
	hash := hex.EncodeToString(h.Sum(nil))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != nil && s.current.GetHash() == hash && s.current.GetContentType() == contentType {
		return s.current.GetVersion()
	}
	version := s.current.GetVersion() + 1
	s.current = &edgev1.ModelUpdate{Version: version, Hash: hash, ContentType: contentType, Model: slices.Clone(model), Certificates: certs}
	for _, e := range s.edges {
		e.refused, e.sentAt = "", time.Time{}
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.log.Info("published model", "version", version, "bytes", len(model))
	return version
}

// StatusChanged receives a token (coalesced) whenever what Status returns
// may have changed.
func (s *Server) StatusChanged() <-chan struct{} { return s.statusChanged }

func (s *Server) notify() {
	select {
	case s.statusChanged <- struct{}{}:
	default:
	}
}

// Stream serves one edge.
func (s *Server) Stream(stream edgev1.ModelDistribution_StreamServer) error {
	name, err := edgeName(stream)
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "the stream must open with a Hello")
	}
	_ = stream.SetHeader(skewcheck.Announced(""))
	if err := skewcheck.Check(skewServer, "fleetnet-edge "+name, hello.GetVersion()); err != nil {
		s.log.Error("edge refused for its version", "edge", name, "err", err)
		return err
	}
	gen := s.connect(name, hello)
	s.log.Info("edge connected", "edge", name, "region", hello.GetRegion(), "serving", hello.GetServingVersion(), "edgeVersion", hello.GetVersion())
	defer func() {
		s.disconnect(name, gen)
		s.log.Info("edge disconnected", "edge", name)
	}()

	acks := make(chan error, 1)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				acks <- err
				return
			}
			if ack := msg.GetAck(); ack != nil {
				s.acknowledge(name, gen, ack)
			}
		}
	}()
	for {
		update, changed := s.pending(name, gen)
		if update != nil {
			if err := stream.Send(update); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case err := <-acks:
			return ignoreClosed(err)
		case <-stream.Context().Done():
			return nil
		}
	}
}

// pending returns the newest model when the edge neither serves it nor has
// been sent it on this stream, and the channel closed by the next version.
func (s *Server) pending(name string, gen int) (*edgev1.ModelUpdate, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.edges[name]
	cur := s.current
	if cur == nil || e == nil || e.stream != gen || (e.serving == cur.GetVersion() && e.hash == cur.GetHash()) || !e.sentAt.IsZero() {
		return nil, s.changed
	}
	e.sentAt = s.now()
	return cur, s.changed
}

func (s *Server) connect(name string, hello *edgev1.Hello) int {
	defer s.notify()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.edges[name]
	if e == nil {
		e = &edge{}
		s.edges[name] = e
	}
	// A newer stream of the same edge replaces the older one.
	e.stream++
	e.region, e.connected, e.since = hello.GetRegion(), true, s.now()
	e.version, _ = skew.Normalize(hello.GetVersion()) // checked
	e.serving, e.hash, e.sentAt, e.refused = hello.GetServingVersion(), hello.GetServingHash(), time.Time{}, ""
	e.without = hello.GetRefused()
	if s.current != nil && e.hash != s.current.GetHash() {
		// Versions restart with the server; only the content tells.
		e.serving, e.without = 0, nil
	}
	return e.stream
}

func (s *Server) disconnect(name string, gen int) {
	defer s.notify()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.edges[name]; e != nil && e.stream == gen {
		e.connected, e.since = false, s.now()
	}
}

func (s *Server) acknowledge(name string, gen int, ack *edgev1.Ack) {
	defer s.notify()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.edges[name]
	if e == nil || e.stream != gen || s.current == nil || ack.GetVersion() != s.current.GetVersion() {
		return // an answer to a version that is no longer the newest
	}
	if ack.GetOk() {
		e.serving, e.hash, e.refused, e.without = ack.GetVersion(), s.current.GetHash(), "", ack.GetRefused()
		s.log.Info("edge serves model", "edge", name, "version", ack.GetVersion(), "refusedParts", len(ack.GetRefused()))
		for _, r := range ack.GetRefused() {
			s.log.Error("edge serves the model without a part", "edge", name, "version", ack.GetVersion(), "part", Describe(r), "reason", r.GetReason())
		}
		return
	}
	e.refused = ack.GetError()
	s.log.Error("edge refused model", "edge", name, "version", ack.GetVersion(), "err", ack.GetError())
}

// EdgeStatus is one edge as the server knows it.
type EdgeStatus struct {
	Name, Region string
	// Version is the edge's release, as it announced it.
	Version   string
	Connected bool
	// Since is when the edge connected, or when it disconnected.
	Since time.Time
	// Serving is the version the edge serves (0: none known).
	Serving int64
	// WaitingSince is when the newest version was sent, while unanswered.
	WaitingSince time.Time
	// Refused is the edge's reason for refusing the newest version.
	Refused string
	// Without are the parts of the version it serves (Serving) that it
	// serves without: listeners and ports it cannot bind.
	Without []*edgev1.Refusal
}

// Status returns the newest version (0: none) and every edge, by name.
func (s *Server) Status() (int64, []EdgeStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]EdgeStatus, 0, len(s.edges))
	for name, e := range s.edges {
		st := EdgeStatus{Name: name, Region: e.region, Version: e.version, Connected: e.connected, Since: e.since, Serving: e.serving, Refused: e.refused, Without: e.without}
		if e.connected && e.serving != s.current.GetVersion() && e.refused == "" {
			st.WaitingSince = e.sentAt
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return s.current.GetVersion(), out
}

// Programmed reports whether version is served: at least one edge is
// connected and every connected edge serves it. An edge that is away keeps
// serving its last good model and does not hold the others up; Summary
// names it.
func Programmed(version int64, edges []EdgeStatus) bool {
	connected := 0
	for _, e := range edges {
		if !e.Connected {
			continue
		}
		connected++
		if e.Serving != version {
			return false
		}
	}
	return version > 0 && connected > 0
}

// Summary says where version stands, for a condition message, e.g.
// "model version 7 served by 1 of 2 connected edges; edge-eu waiting since
// 12s".
func Summary(version int64, edges []EdgeStatus, now time.Time) string {
	if version == 0 {
		return "no model published yet"
	}
	connected, serving := 0, 0
	var notes []string
	for _, e := range edges {
		switch {
		case !e.Connected:
			notes = append(notes, fmt.Sprintf("%s disconnected %s ago, serving version %d", e.Name, age(now, e.Since), e.Serving))
			continue
		case e.Serving == version:
			serving++
			if len(e.Without) > 0 {
				parts := make([]string, len(e.Without))
				for i, r := range e.Without {
					parts[i] = Describe(r)
				}
				notes = append(notes, fmt.Sprintf("%s serves it without %s", e.Name, strings.Join(parts, ", ")))
			}
		case e.Refused != "":
			notes = append(notes, fmt.Sprintf("%s refused it: %s", e.Name, e.Refused))
		case !e.WaitingSince.IsZero():
			notes = append(notes, fmt.Sprintf("%s waiting since %s", e.Name, age(now, e.WaitingSince)))
		default:
			notes = append(notes, fmt.Sprintf("%s not sent it yet", e.Name))
		}
		connected++
	}
	if connected == 0 {
		msg := fmt.Sprintf("model version %d: no edge connected", version)
		if len(notes) > 0 {
			msg += "; " + strings.Join(notes, "; ")
		}
		return msg
	}
	msg := fmt.Sprintf("model version %d served by %d of %d connected edges", version, serving, connected)
	if len(notes) > 0 {
		msg += "; " + strings.Join(notes, "; ")
	}
	return msg
}

func age(now, t time.Time) time.Duration { return now.Sub(t).Round(time.Second) }

// Describe names a part an edge serves a model without, e.g. "listener
// metrics of Gateway demo/web (port 9090)".
func Describe(r *edgev1.Refusal) string {
	obj := r.GetNamespace() + "/" + r.GetName()
	if r.GetKind() == edgev1.RefusalKindLoadBalancer {
		return fmt.Sprintf("port %d/%s of MultiClusterLoadBalancer %s", r.GetPort(), r.GetProtocol(), obj)
	}
	return fmt.Sprintf("listener %s of %s %s (port %d)", r.GetListener(), r.GetKind(), obj, r.GetPort())
}

// Serve serves the model stream on srv (its credentials require edges'
// client certificates) at addr until ctx ends; flag names addr in errors.
func (s *Server) Serve(ctx context.Context, addr string, srv *grpc.Server, flag string, log *slog.Logger) error {
	edgev1.RegisterModelDistributionServer(srv, s)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	go func() {
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			srv.Stop() // edge streams never end on their own
		}
	}()
	log.Info("serving models to edges", "address", lis.Addr().String())
	return srv.Serve(lis)
}

// edgeName is the common name of the caller's client certificate, which
// must be an edge's (organization fleetnet:edges).
func edgeName(stream edgev1.ModelDistribution_StreamServer) (string, error) {
	p, ok := peer.FromContext(stream.Context())
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no peer information")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", status.Error(codes.Unauthenticated, "a client certificate signed by the fleet CA is required")
	}
	cert := info.State.VerifiedChains[0][0]
	if !slices.Contains(cert.Subject.Organization, keys.OrganizationEdges) || cert.Subject.CommonName == "" {
		return "", status.Errorf(codes.PermissionDenied, "client certificate %q is not an edge's (organization %s)", cert.Subject.CommonName, keys.OrganizationEdges)
	}
	return cert.Subject.CommonName, nil
}

func ignoreClosed(err error) error {
	if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
		return nil
	}
	return err
}
