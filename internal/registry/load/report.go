package load

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/protobuf/proto"
)

// Report is what a load run measured.
type Report struct {
	Config Config
	// Phases in the order they ran.
	Phases []Phase
	// Endpoints is how many endpoints were exported in all.
	Endpoints int
	// SnapshotBytes is the encoded size of one watcher's snapshot.
	SnapshotBytes int64
	// ChunkBytes is the encoded size of one changed chunk, for comparing
	// with Fanout.BytesPerWatcherPerChange.
	ChunkBytes int
	Churn      ChurnStats
	Fanout     FanoutStats
	Leases     LeaseStats
	// Lost counts acknowledged writes the registry no longer held.
	Lost int
	// ExtraSnapshots counts snapshots the watchers received after their
	// first: each is a watch that could not resume from its revision.
	ExtraSnapshots int
	// Resumes counts watches reopened from a revision.
	Resumes int
}

// Phase is one step of the run.
type Phase struct {
	Name string
	Took time.Duration
	// Ops counts the phase's calls (or watchers, for the snapshot).
	Ops    int
	Errors int
	// Latency of each call (for the snapshot: from opening the watch to
	// its synced mark).
	Latency Percentiles
}

// ChurnStats describes the endpoint changes written.
type ChurnStats struct {
	Changes, Failed int
	// Late counts changes sent more than one interval after their time.
	Late int
	// Rate is the rate achieved, per second.
	Rate float64
}

// FanoutStats describes how the changes reached the watchers: PerWatcher
// from each write to each watcher's receipt, AllWatchers from each write
// to the last watcher's receipt, AfterAck from the write's
// acknowledgement to the last watcher's receipt (0 when every watcher had
// it before the writer had its acknowledgement): the registry's fan-out
// without the store's commit.
type FanoutStats struct {
	Deliveries int
	// Complete counts the changes every watcher received.
	Complete                 int
	PerWatcher, AllWatchers  Percentiles
	AfterAck                 Percentiles
	BytesPerWatcherPerChange float64
}

// LeaseStats describes the lease renewals.
type LeaseStats struct {
	Renewals, Failures int
	// Lapses counts renewals answered NotFound: the lease had expired.
	Lapses  int
	Latency Percentiles
}

// Percentiles of a set of durations.
type Percentiles struct {
	N                        int
	P50, P90, P99, P999, Max time.Duration
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return Percentiles{N: len(s), P50: at(0.5), P90: at(0.9), P99: at(0.99), P999: at(0.999), Max: s[len(s)-1]}
}

func maxDuration(ds []time.Duration) time.Duration { return slices.Max(ds) }

func chunkSize(c *registryv1.EndpointChunk) int {
	return proto.Size(&registryv1.WatchEvent{Revision: 1 << 40, Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: c}})
}

func (r *Report) add(p Phase) { r.Phases = append(r.Phases, p) }

func phaseOf(name string, start time.Time, lat []time.Duration, errs []error) Phase {
	return Phase{Name: name, Took: time.Since(start), Ops: len(lat), Errors: len(errs), Latency: percentiles(lat)}
}

// Phase returns the phase named name, or a zero one.
func (r *Report) Phase(name string) Phase {
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	return Phase{}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// Write prints the report as one table.
func (r *Report) Write(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "%d clusters, %d services x %d exporters x %d endpoints = %d endpoints, %d watchers, churn %g/s for %s\n",
		c.Clusters, c.Services, c.ExportersPerService, c.EndpointsPerExport, r.Endpoints, c.Watchers, c.Churn, c.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\ttook\tops\terrors\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\t")
	for _, p := range r.Phases {
		took := p.Took
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n", p.Name, took.Round(time.Millisecond), p.Ops, p.Errors,
			ms(p.Latency.P50), ms(p.Latency.P99), ms(p.Latency.P999), ms(p.Latency.Max))
	}
	f := r.Fanout
	fmt.Fprintf(tw, "change to a watcher\t\t%d\t\t%s\t%s\t%s\t%s\t\n", f.PerWatcher.N, ms(f.PerWatcher.P50), ms(f.PerWatcher.P99), ms(f.PerWatcher.P999), ms(f.PerWatcher.Max))
	fmt.Fprintf(tw, "change to all watchers\t\t%d\t\t%s\t%s\t%s\t%s\t\n", f.AllWatchers.N, ms(f.AllWatchers.P50), ms(f.AllWatchers.P99), ms(f.AllWatchers.P999), ms(f.AllWatchers.Max))
	fmt.Fprintf(tw, "  ... after the write's ack\t\t%d\t\t%s\t%s\t%s\t%s\t\n", f.AfterAck.N, ms(f.AfterAck.P50), ms(f.AfterAck.P99), ms(f.AfterAck.P999), ms(f.AfterAck.Max))
	l := r.Leases
	fmt.Fprintf(tw, "lease renewal\t\t%d\t%d\t%s\t%s\t%s\t%s\t\n", l.Renewals, l.Failures, ms(l.Latency.P50), ms(l.Latency.P99), ms(l.Latency.P999), ms(l.Latency.Max))
	tw.Flush()
	fmt.Fprintf(w, "churn: %d changes at %.1f/s (%d failed, %d late); %d of them reached every watcher\n", r.Churn.Changes, r.Churn.Rate, r.Churn.Failed, r.Churn.Late, f.Complete)
	fmt.Fprintf(w, "bytes per watcher: snapshot %d, per change %.0f (one changed chunk's event: %d)\n", r.SnapshotBytes, f.BytesPerWatcherPerChange, r.ChunkBytes)
	fmt.Fprintf(w, "acknowledged writes lost: %d; lease lapses: %d; snapshots after the first: %d; watch resumes: %d\n", r.Lost, l.Lapses, r.ExtraSnapshots, r.Resumes)
}
