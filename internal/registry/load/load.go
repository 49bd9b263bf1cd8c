// Package load is a fleet load generator for the registry: simulated
// clusters, each a real registry client with a client certificate of its
// own, that register and renew their leases, export services with
// endpoints, change endpoints at a given rate and watch the imports as
// agents do. It reports per-phase timings and latency percentiles.
// `fleetnetctl registry load` and `make bench-scale` run it.
//
// It is bounded: counts are capped (see Config.Validate), every phase has a
// deadline, and it talks only to loopback addresses, so a mistyped address
// never loads someone else's registry.
package load

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Limits keep a load run bounded whatever its flags say.
const (
	MaxClusters  = 1000
	MaxServices  = 100000
	MaxEndpoints = 1000000
	MaxWatchers  = 1000
	MaxChurn     = 2000
	MaxDuration  = 10 * time.Minute
)

// Config sizes a load run.
type Config struct {
	// Clusters is how many clusters are simulated.
	Clusters int
	// Services is how many services are exported in all.
	Services int
	// ExportersPerService is how many clusters export each service.
	ExportersPerService int
	// EndpointsPerExport is how many endpoints each export has.
	EndpointsPerExport int
	// EndpointsPerChunk splits an export's endpoints into chunks as
	// EndpointSlices would (100 when zero, the EndpointSlice controller's
	// default).
	EndpointsPerChunk int
	// Churn is how many endpoint changes per second are written during the
	// churn phase; each rewrites one chunk with one endpoint changed.
	Churn float64
	// Watchers is how many import watches are opened, each on the
	// connection of one simulated cluster, as agents do.
	Watchers int
	// Duration is how long the churn phase lasts.
	Duration time.Duration
	// Idle is how long a phase with nothing but lease renewals lasts after
	// the churn (for measuring their cost); none when zero.
	Idle time.Duration
	// Writers is how many writes are in flight at once (64 when zero).
	Writers int
	// Prefix starts every simulated cluster's id ("load" when empty).
	Prefix string
	// Namespace holds every exported service ("fleetnet-load" when empty).
	Namespace string
	// Seed makes the churn's choice of chunks repeatable.
	Seed uint64
	// Cleanup deletes the exports and deregisters the clusters at the end.
	Cleanup bool
	// PhaseTimeout bounds each phase that waits for the registry (the
	// snapshots, convergence); 2 minutes when zero.
	PhaseTimeout time.Duration
	// OnPhase, when set, is called as each phase starts (and with "done"
	// at the end), for a harness that measures around phases or injects
	// faults.
	OnPhase func(phase string)
	// OnWrite, when set, is called after each churn write with when it
	// ended and its error: a fault test sees when writes resumed.
	OnWrite func(at time.Time, err error)
	// Log reports progress; nothing when nil.
	Log *slog.Logger
}

func (c *Config) defaults() {
	if c.EndpointsPerChunk == 0 {
		c.EndpointsPerChunk = 100
	}
	if c.Writers == 0 {
		c.Writers = 64
	}
	if c.Prefix == "" {
		c.Prefix = "load"
	}
	if c.Namespace == "" {
		c.Namespace = "fleetnet-load"
	}
	if c.PhaseTimeout == 0 {
		c.PhaseTimeout = 2 * time.Minute
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Validate checks the counts against the limits.
func (c *Config) Validate() error {
	var errs []error
	check := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%s=%d: must be %d to %d", name, v, lo, hi))
		}
	}
	check("clusters", c.Clusters, 1, MaxClusters)
	check("services", c.Services, 1, MaxServices)
	check("exporters per service", c.ExportersPerService, 1, min(c.Clusters, 10))
	check("endpoints per export", c.EndpointsPerExport, 1, 10000)
	check("endpoints per chunk", c.EndpointsPerChunk, 1, 1000)
	check("watchers", c.Watchers, 0, MaxWatchers)
	check("writers", c.Writers, 1, 1000)
	if total := c.Services * c.ExportersPerService * c.EndpointsPerExport; total > MaxEndpoints {
		errs = append(errs, fmt.Errorf("%d endpoints in all: at most %d", total, MaxEndpoints))
	}
	if c.Churn < 0 || c.Churn > MaxChurn {
		errs = append(errs, fmt.Errorf("churn=%g/s: must be 0 to %d", c.Churn, MaxChurn))
	}
	for name, d := range map[string]time.Duration{"duration": c.Duration, "idle": c.Idle, "phase timeout": c.PhaseTimeout} {
		if d < 0 || d > MaxDuration {
			errs = append(errs, fmt.Errorf("%s=%s: must be 0 to %s", name, d, MaxDuration))
		}
	}
	return errors.Join(errs...)
}

// Target is the registry under load.
type Target struct {
	// Address is host:port of the registry, or several comma-separated
	// (its replicas); every host must be a loopback address.
	Address string
	// CAFile is the CA bundle that signed the registry's certificate.
	CAFile string
	// CA signs a client certificate for each simulated cluster.
	CA *pki.KeyPair
	// CertDir receives those certificates.
	CertDir string
	// DialOptions are added to every connection's.
	DialOptions []grpc.DialOption
}

// Loopback refuses addresses that are not loopback ones.
func Loopback(address string) error {
	addrs, err := client.SplitAddresses(address)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		if host == "localhost" {
			continue
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("registry address %s: the load generator talks only to loopback addresses (127.0.0.0/8, ::1, localhost)", a)
		}
	}
	return nil
}

// sim is one simulated cluster.
type sim struct {
	id   string
	rc   registryv1.RegistryClient
	conn *grpc.ClientConn
	ttl  time.Duration
}

// chunkRef names one chunk the generator writes.
type chunkRef struct {
	service, cluster, chunk int
}

type run struct {
	cfg    Config
	target Target
	sims   []*sim
	chunks []chunkRef
	report *Report

	// acked is the version of each chunk's last acknowledged write, by
	// index in chunks; a chunk's version is the churn sequence number of
	// its last write (0: the first).
	ackedMu sync.Mutex
	acked   []int64

	// sent holds the send time (UnixNano) of each churn write, by sequence,
	// and acked how long its acknowledgement took (0: none).
	sent    []atomic.Int64
	ackTook []atomic.Int64

	fanMu    sync.Mutex
	fanout   map[int64][]time.Duration
	churning atomic.Bool
}

// Run runs the load and returns its report. The report is returned, as far
// as it got, together with an error.
func Run(ctx context.Context, cfg Config, target Target) (*Report, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := Loopback(target.Address); err != nil {
		return nil, err
	}
	if target.CA == nil {
		return nil, errors.New("no CA to sign the simulated clusters' certificates")
	}
	bound := 4*cfg.PhaseTimeout + cfg.Duration + cfg.Idle + 10*time.Minute
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()

	r := &run{cfg: cfg, target: target, report: &Report{Config: cfg}, fanout: map[int64][]time.Duration{}}
	r.layout()
	defer r.close()
	err := r.run(ctx)
	r.phase("done")
	return r.report, err
}

func (r *run) phase(name string) {
	r.cfg.Log.Info("load phase", "phase", name)
	if r.cfg.OnPhase != nil {
		r.cfg.OnPhase(name)
	}
}

// layout decides which cluster exports which service, and the chunks.
func (r *run) layout() {
	c := r.cfg
	perExport := (c.EndpointsPerExport + c.EndpointsPerChunk - 1) / c.EndpointsPerChunk
	for s := range c.Services {
		for k := range c.ExportersPerService {
			cl := (s*c.ExportersPerService + k) % c.Clusters
			for j := range perExport {
				r.chunks = append(r.chunks, chunkRef{service: s, cluster: cl, chunk: j})
			}
		}
	}
	r.acked = make([]int64, len(r.chunks))
	r.sent = make([]atomic.Int64, int(c.Churn*c.Duration.Seconds())+2)
	r.ackTook = make([]atomic.Int64, len(r.sent))
}

func (r *run) close() {
	for _, s := range r.sims {
		if s.conn != nil {
			s.conn.Close()
		}
	}
}

// run goes through the phases in order: connect, register, export,
// snapshot, churn, converge, idle, verify and cleanup, each timed into the
// report. Leases are renewed and watchers watch from their phase to the end.
func (r *run) run(ctx context.Context) error {
	c := r.cfg
	rep := r.report

	r.phase("connect")
	start := time.Now()
	if err := r.connect(); err != nil {
		return err
	}
	rep.add(Phase{Name: "connect", Took: time.Since(start), Ops: len(r.sims)})

	r.phase("register")
	if err := r.register(ctx); err != nil {
		return err
	}

	// Leases are renewed from here to the end, as agents renew them.
	leaseCtx, stopLeases := context.WithCancel(ctx)
	var leases sync.WaitGroup
	leaseStats := &leaseCounter{}
	for i, s := range r.sims {
		leases.Go(func() { r.renew(leaseCtx, s, uint64(i), leaseStats) })
	}
	defer func() {
		stopLeases()
		leases.Wait()
		rep.Leases = leaseStats.summary()
	}()

	r.phase("export")
	if err := r.exportAll(ctx); err != nil {
		return err
	}

	// Watchers connect at once to the full state, as agents do after a
	// registry restart.
	r.phase("snapshot")
	watchCtx, stopWatching := context.WithCancel(ctx)
	var watching sync.WaitGroup
	defer func() {
		stopWatching()
		watching.Wait()
	}()
	watchers, err := r.snapshot(ctx, watchCtx, &watching)
	if err != nil {
		return err
	}

	r.phase("churn")
	if err := r.churn(ctx, watchers); err != nil {
		return err
	}

	r.phase("converge")
	start = time.Now()
	if err := r.converge(ctx, watchers); err != nil {
		return err
	}
	rep.add(Phase{Name: "converge", Took: time.Since(start)})

	if c.Idle > 0 {
		r.phase("idle")
		before := leaseStats.count()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.Idle):
		}
		rep.add(Phase{Name: "idle", Took: c.Idle, Ops: int(leaseStats.count() - before)})
	}

	r.phase("verify")
	if err := r.verifyAll(ctx, watchers); err != nil {
		return err
	}

	if c.Cleanup {
		r.phase("cleanup")
		stopWatching()
		stopLeases()
		return r.cleanup(ctx)
	}
	return nil
}

// register registers every simulated cluster and keeps its lease TTL.
func (r *run) register(ctx context.Context) error {
	start := time.Now()
	lat, errs := r.parallel(ctx, len(r.sims), func(ctx context.Context, i int) error {
		s := r.sims[i]
		resp, err := s.rc.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: s.id, ClustersetId: "load", Region: fmt.Sprintf("region-%d", i%4)}})
		if err != nil {
			return fmt.Errorf("registering %s: %w", s.id, err)
		}
		s.ttl = time.Duration(resp.GetLeaseTtlSeconds()) * time.Second
		return nil
	})
	r.report.add(phaseOf("register", start, lat, errs))
	return errors.Join(errs...)
}

// exports is how many exports the run writes (services × exporters) and
// how many endpoint chunks each has.
func (r *run) exports() (items, chunksPerExport int) {
	items = r.cfg.Services * r.cfg.ExportersPerService
	return items, len(r.chunks) / items
}

// exportAll writes every export and its endpoint chunks.
func (r *run) exportAll(ctx context.Context) error {
	c := r.cfg
	start := time.Now()
	items, chunksPerExport := r.exports()
	lat, errs := r.parallel(ctx, items, func(ctx context.Context, i int) error {
		s, cl := i/c.ExportersPerService, r.chunks[i*chunksPerExport].cluster
		sim := r.sims[cl]
		if _, err := sim.rc.PutExport(ctx, &registryv1.PutExportRequest{Export: r.export(s, cl)}); err != nil {
			return fmt.Errorf("exporting service %d from %s: %w", s, sim.id, err)
		}
		for j := range chunksPerExport {
			idx := i*chunksPerExport + j
			if _, err := sim.rc.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: r.chunk(idx, 0)}); err != nil {
				return fmt.Errorf("writing endpoints of service %d from %s: %w", s, sim.id, err)
			}
		}
		return nil
	})
	ph := phaseOf("export", start, lat, errs)
	ph.Ops = items * (1 + chunksPerExport)
	r.report.add(ph)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.report.Endpoints = c.Services * c.ExportersPerService * c.EndpointsPerExport
	return nil
}

// snapshot starts the watchers (they watch until watchCtx ends, counted in
// watching), waits for every one's first snapshot and checks it is whole.
func (r *run) snapshot(ctx, watchCtx context.Context, watching *sync.WaitGroup) ([]*Watcher, error) {
	c, rep := r.cfg, r.report
	watchers := make([]*Watcher, c.Watchers)
	snapTimes := make([]time.Duration, c.Watchers)
	var snapMu sync.Mutex
	var synced sync.WaitGroup
	start := time.Now()
	for i := range watchers {
		synced.Add(1)
		var once sync.Once
		begun := time.Now()
		w := &Watcher{Conn: r.sims[i%len(r.sims)].conn}
		w.OnSynced = func(at time.Time) {
			once.Do(func() {
				snapMu.Lock()
				snapTimes[i] = at.Sub(begun)
				snapMu.Unlock()
				synced.Done()
			})
		}
		w.OnChunk = r.delivered
		watchers[i] = w
		watching.Go(func() { w.Run(watchCtx) })
	}
	if err := waitGroup(ctx, &synced, c.PhaseTimeout); err != nil {
		return nil, fmt.Errorf("waiting for %d watchers' snapshots: %w", c.Watchers, err)
	}
	snap := Phase{Name: "snapshot", Took: time.Since(start), Ops: c.Watchers}
	snap.Latency = percentiles(snapTimes)
	var snapBytes int64
	for _, w := range watchers {
		st := w.Stats()
		snapBytes += st.Bytes
		if st.Endpoints != rep.Endpoints || st.Imports != c.Services {
			return nil, fmt.Errorf("a watcher's snapshot holds %d imports and %d endpoints, want %d and %d", st.Imports, st.Endpoints, c.Services, rep.Endpoints)
		}
	}
	if c.Watchers > 0 {
		rep.SnapshotBytes = snapBytes / int64(c.Watchers)
	}
	rep.add(snap)
	return watchers, nil
}

// verifyAll reads every chunk back and checks that each watcher holds
// every import.
func (r *run) verifyAll(ctx context.Context, watchers []*Watcher) error {
	start := time.Now()
	if err := r.verify(ctx); err != nil {
		return err
	}
	for i, w := range watchers {
		st := w.Stats()
		r.report.ExtraSnapshots += st.Snapshots - 1
		r.report.Resumes += st.Resumes
		if st.Imports != r.cfg.Services {
			return fmt.Errorf("watcher %d holds %d imports at the end, want %d", i, st.Imports, r.cfg.Services)
		}
	}
	r.report.add(Phase{Name: "verify", Took: time.Since(start), Ops: len(r.chunks)})
	return nil
}

// cleanup withdraws every export and deregisters every cluster.
func (r *run) cleanup(ctx context.Context) error {
	start := time.Now()
	items, chunksPerExport := r.exports()
	lat, errs := r.parallel(ctx, items, func(ctx context.Context, i int) error {
		s, cl := i/r.cfg.ExportersPerService, r.chunks[i*chunksPerExport].cluster
		_, err := r.sims[cl].rc.DeleteExport(ctx, &registryv1.DeleteExportRequest{Key: r.export(s, cl).GetKey()})
		return err
	})
	_, derrs := r.parallel(ctx, len(r.sims), func(ctx context.Context, i int) error {
		_, err := r.sims[i].rc.DeregisterCluster(ctx, &registryv1.DeregisterClusterRequest{ClusterId: r.sims[i].id})
		return err
	})
	r.report.add(phaseOf("cleanup", start, lat, append(errs, derrs...)))
	if err := errors.Join(append(errs, derrs...)...); err != nil {
		return fmt.Errorf("cleaning up: %w", err)
	}
	return nil
}

// connect writes a certificate per simulated cluster and dials with it.
func (r *run) connect() error {
	if err := os.MkdirAll(r.target.CertDir, 0o700); err != nil {
		return fmt.Errorf("certificate directory: %w", err)
	}
	for i := range r.cfg.Clusters {
		id := fmt.Sprintf("%s-%04d", r.cfg.Prefix, i)
		kp, err := r.target.CA.ClusterCert(id)
		if err != nil {
			return fmt.Errorf("certificate of %s: %w", id, err)
		}
		if err := kp.Write(r.target.CertDir, id); err != nil {
			return fmt.Errorf("certificate of %s: %w", id, err)
		}
		rc, conn, err := client.Dial(client.Options{
			Address: r.target.Address, CAFile: r.target.CAFile,
			CertFile: filepath.Join(r.target.CertDir, id+".crt"), KeyFile: filepath.Join(r.target.CertDir, id+".key"),
			DialOptions: r.target.DialOptions,
		})
		if err != nil {
			return err
		}
		r.sims = append(r.sims, &sim{id: id, rc: rc, conn: conn})
	}
	return nil
}

func (r *run) serviceName(s int) string { return fmt.Sprintf("svc-%05d", s) }

func (r *run) export(s, cl int) *registryv1.Export {
	return &registryv1.Export{
		Key:           &registryv1.ExportKey{Namespace: r.cfg.Namespace, Name: r.serviceName(s), ClusterId: r.sims[cl].id},
		ExportedSince: timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		Type:          "ClusterSetIP",
		Ports:         []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}},
		IpFamilies:    []string{"IPv4"},
		Weight:        1,
	}
}

// chunk builds chunk idx at version: its first endpoint carries the version
// in its hostname and an address that moves with it.
func (r *run) chunk(idx int, version int64) *registryv1.EndpointChunk {
	ref := r.chunks[idx]
	c := r.cfg
	n := min(c.EndpointsPerChunk, c.EndpointsPerExport-ref.chunk*c.EndpointsPerChunk)
	eps := make([]*registryv1.Endpoint, n)
	base := uint32(idx) * uint32(c.EndpointsPerChunk)
	for e := range eps {
		a := base + uint32(e)
		if e == 0 {
			a += uint32(version) * 7919
		}
		eps[e] = &registryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", (a>>16)&0xff, (a>>8)&0xff, a&0xff)},
			Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true},
			Zone:       fmt.Sprintf("zone-%d", e%3),
		}
	}
	eps[0].Hostname = fmt.Sprintf("%s%d", versionPrefix, version)
	return &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: c.Namespace, Name: r.serviceName(ref.service), ClusterId: r.sims[ref.cluster].id, Chunk: fmt.Sprintf("slice-%d", ref.chunk)},
		AddressType: "IPv4",
		Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
		Endpoints:   eps,
	}
}

// parallel runs fn for 0..n-1 on the writers and returns each call's
// latency and the errors.
func (r *run) parallel(ctx context.Context, n int, fn func(context.Context, int) error) ([]time.Duration, []error) {
	lat := make([]time.Duration, n)
	var mu sync.Mutex
	var errs []error
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(r.cfg.Writers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				start := time.Now()
				err := fn(ctx, i)
				lat[i] = time.Since(start)
				if err != nil {
					mu.Lock()
					if len(errs) < 10 {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil && len(errs) == 0 {
		errs = append(errs, ctx.Err())
	}
	return lat, errs
}

// renew renews a cluster's lease every third of its TTL, with jitter, as
// the agent does; a NotFound means the lease lapsed.
func (r *run) renew(ctx context.Context, s *sim, seed uint64, st *leaseCounter) {
	rnd := rand.New(rand.NewPCG(r.cfg.Seed, seed))
	for {
		wait := time.Duration(float64(s.ttl) / 3 * (0.8 + 0.4*rnd.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		start := time.Now()
		_, err := s.rc.RenewLease(ctx, &registryv1.RenewLeaseRequest{ClusterId: s.id})
		if ctx.Err() != nil {
			return
		}
		st.record(time.Since(start), err)
		if status.Code(err) == codes.NotFound {
			r.cfg.Log.Warn("lease lapsed; registering again", "cluster", s.id)
			_, _ = s.rc.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: s.id, ClustersetId: "load"}})
		}
	}
}

// delivered records that a watcher received a chunk at version.
func (r *run) delivered(version int64, at time.Time) {
	if version <= 0 || version >= int64(len(r.sent)) || !r.churning.Load() {
		return
	}
	sent := r.sent[version].Load()
	if sent == 0 {
		return
	}
	r.fanMu.Lock()
	r.fanout[version] = append(r.fanout[version], at.Sub(time.Unix(0, sent)))
	r.fanMu.Unlock()
}

// churn rewrites one chunk at a time at the configured rate, never two
// writes of one chunk at once, so that acknowledgements come in order.
func (r *run) churn(ctx context.Context, watchers []*Watcher) error {
	c := r.cfg
	total := int64(len(r.sent) - 2)
	if total <= 0 {
		return nil
	}
	var before int64
	for _, w := range watchers {
		before += w.Stats().Bytes
	}
	r.churning.Store(true)
	rnd := rand.New(rand.NewPCG(c.Seed, 17))
	busy := map[int]bool{}
	var busyMu sync.Mutex
	sem := make(chan struct{}, c.Writers)
	var wg sync.WaitGroup
	var writeLat []time.Duration
	var failed, late int
	var latMu sync.Mutex
	start := time.Now()
	interval := time.Duration(float64(time.Second) / c.Churn)
	for seq := int64(1); seq <= total; seq++ {
		due := start.Add(time.Duration(seq-1) * interval)
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		} else if d < -interval {
			late++
		}
		busyMu.Lock()
		idx := rnd.IntN(len(r.chunks))
		for busy[idx] {
			idx = rnd.IntN(len(r.chunks))
		}
		busy[idx] = true
		busyMu.Unlock()
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			chunk := r.chunk(idx, seq)
			begun := time.Now()
			r.sent[seq].Store(begun.UnixNano())
			_, err := r.sims[r.chunks[idx].cluster].rc.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk})
			took := time.Since(begun)
			if c.OnWrite != nil {
				c.OnWrite(time.Now(), err)
			}
			if err == nil {
				r.ackTook[seq].Store(int64(max(took, 1)))
				r.ackedMu.Lock()
				r.acked[idx] = max(r.acked[idx], seq)
				r.ackedMu.Unlock()
			}
			busyMu.Lock()
			delete(busy, idx)
			busyMu.Unlock()
			latMu.Lock()
			writeLat = append(writeLat, took)
			if err != nil {
				failed++
			}
			latMu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	ph := Phase{Name: "churn", Took: took, Ops: int(total), Errors: failed, Latency: percentiles(writeLat)}
	r.report.add(ph)
	r.report.Churn = ChurnStats{Changes: int(total), Failed: failed, Late: late, Rate: float64(total) / took.Seconds()}
	// Give the last deliveries a moment, then count.
	deadline := time.Now().Add(r.cfg.PhaseTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.fanMu.Lock()
		n := len(r.fanout[total])
		r.fanMu.Unlock()
		if n >= len(watchers) || failed > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var after int64
	for _, w := range watchers {
		after += w.Stats().Bytes
	}
	r.churning.Store(false)
	r.fanMu.Lock()
	defer r.fanMu.Unlock()
	var all, reachAll, afterAck []time.Duration
	complete := 0
	for seq, ds := range r.fanout {
		all = append(all, ds...)
		if len(ds) >= len(watchers) {
			complete++
			last := maxDuration(ds)
			reachAll = append(reachAll, last)
			if ack := time.Duration(r.ackTook[seq].Load()); ack > 0 {
				afterAck = append(afterAck, max(0, last-ack))
			}
		}
	}
	r.report.Fanout = FanoutStats{
		Deliveries: len(all), Complete: complete,
		PerWatcher: percentiles(all), AllWatchers: percentiles(reachAll), AfterAck: percentiles(afterAck),
	}
	if len(watchers) > 0 && total > 0 {
		r.report.Fanout.BytesPerWatcherPerChange = float64(after-before) / float64(len(watchers)) / float64(total)
	}
	r.report.ChunkBytes = chunkSize(r.chunk(0, total))
	return nil
}

// converge waits until every watcher holds, for every chunk, at least the
// version last acknowledged.
func (r *run) converge(ctx context.Context, watchers []*Watcher) error {
	want := map[string]int64{}
	r.ackedMu.Lock()
	for i := range r.chunks {
		want[ChunkKey(r.chunk(i, 0).GetKey())] = r.acked[i]
	}
	r.ackedMu.Unlock()
	deadline := time.Now().Add(r.cfg.PhaseTimeout)
	for i, w := range watchers {
		for {
			behind := 0
			have := w.Versions()
			for k, v := range want {
				if have[k] < v {
					behind++
				}
			}
			if behind == 0 {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("watcher %d still misses %d acknowledged chunk writes after %s", i, behind, r.cfg.PhaseTimeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// verify reads every simulated cluster's chunks back from the registry: no
// acknowledged write may be missing (a chunk may be newer, when a write
// failed after the store committed it).
func (r *run) verify(ctx context.Context) error {
	have := map[string]int64{}
	for _, s := range r.sims {
		resp, err := s.rc.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: s.id, IncludeEndpoints: true})
		if err != nil {
			return fmt.Errorf("reading back the exports of %s: %w", s.id, err)
		}
		for _, ch := range resp.GetEndpoints() {
			have[ChunkKey(ch.GetKey())] = chunkVersion(ch)
		}
	}
	r.ackedMu.Lock()
	defer r.ackedMu.Unlock()
	var lost []string
	for i := range r.chunks {
		k := ChunkKey(r.chunk(i, 0).GetKey())
		if v, ok := have[k]; !ok || v < r.acked[i] {
			lost = append(lost, fmt.Sprintf("%s (acknowledged version %d, registry holds %d)", k, r.acked[i], v))
		}
	}
	r.report.Lost = len(lost)
	if len(lost) > 0 {
		return fmt.Errorf("%d acknowledged writes lost, e.g. %v", len(lost), lost[:min(5, len(lost))])
	}
	return nil
}

func waitGroup(ctx context.Context, wg *sync.WaitGroup, timeout time.Duration) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return fmt.Errorf("not done within %s", timeout)
	}
}

type leaseCounter struct {
	mu       sync.Mutex
	lat      []time.Duration
	failures int
	lapses   int
}

func (l *leaseCounter) record(d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lat = append(l.lat, d)
	if err != nil {
		l.failures++
	}
	if status.Code(err) == codes.NotFound {
		l.lapses++
	}
}

func (l *leaseCounter) count() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.lat))
}

func (l *leaseCounter) summary() LeaseStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LeaseStats{Renewals: len(l.lat), Failures: l.failures, Lapses: l.lapses, Latency: percentiles(l.lat)}
}
