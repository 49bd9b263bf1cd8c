package store

import (
	"encoding/json"
	"fmt"
	"testing"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/google/go-cmp/cmp"
)

const base = 1000

func ep(id string, ready bool, addrs ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{InstanceID: id, Addresses: addrs, Ready: ready, Serving: ready}
}

func pool(ns, name string, labels map[string]string, clusters ...discoveryv1.PoolCluster) discoveryv1.Pool {
	return discoveryv1.Pool{Namespace: ns, Name: name, Labels: labels, Clusters: clusters}
}

func cluster(name, region string, eps ...discoveryv1.Endpoint) discoveryv1.PoolCluster {
	return discoveryv1.PoolCluster{Cluster: name, Region: region, Endpoints: eps}
}

// step is one call on the store.
type step struct {
	source string
	pool   discoveryv1.Pool // replaces source's contribution
	del    bool             // deletes source's contribution to pool's key
	all    []discoveryv1.Pool
	isAll  bool // ReplaceSource(source, all)
}

func (s step) apply(st *Store) {
	switch {
	case s.isAll:
		st.ReplaceSource(s.source, s.all)
	case s.del:
		st.Delete(s.source, KeyOf(&s.pool))
	default:
		st.Replace(s.source, s.pool)
	}
}

// brief describes an event for comparison: type, revision, pool key and
// the pool's clusters and endpoints.
func brief(e *Event) string {
	s := fmt.Sprintf("%s@%d", e.Type, e.Revision-base)
	if e.Pool != nil {
		s += " " + e.Pool.Namespace + "/" + e.Pool.Name
		for _, c := range e.Pool.Clusters {
			s += " " + c.Cluster + ":"
			for _, ep := range c.Endpoints {
				r := "-"
				if ep.Ready {
					r = "+"
				}
				s += ep.InstanceID + r
			}
		}
		for k, v := range e.Pool.Labels {
			s += " " + k + "=" + v
		}
	}
	return s
}

func drain(w *Watcher) []string {
	var out []string
	for {
		select {
		case e := <-w.C():
			out = append(out, brief(e))
		default:
			return out
		}
	}
}

func TestChanges(t *testing.T) {
	echo := func(clusters ...discoveryv1.PoolCluster) discoveryv1.Pool {
		return pool("demo", "echo", nil, clusters...)
	}
	tests := []struct {
		name  string
		steps []step
		want  []string
	}{
		{
			name:  "a new pool is an upsert",
			steps: []step{{source: "a", pool: echo(cluster("east", "eu", ep("p1", true, "10.0.0.1")))}},
			want:  []string{"upsert@1 demo/echo east:p1+"},
		},
		{
			name: "the same state in another order is no change",
			steps: []step{
				{source: "a", pool: echo(cluster("east", "eu", ep("p1", true, "10.0.0.1"), ep("p2", true, "10.0.0.2")), cluster("west", "us"))},
				{source: "a", pool: echo(cluster("west", "us"), cluster("east", "eu", ep("p2", true, "10.0.0.2"), ep("p1", true, "10.0.0.1")))},
			},
			want: []string{"upsert@1 demo/echo east:p1+p2+ west:"},
		},
		{
			name: "a readiness change is one revision",
			steps: []step{
				{source: "a", pool: echo(cluster("east", "eu", ep("p1", true, "10.0.0.1")))},
				{source: "a", pool: echo(cluster("east", "eu", ep("p1", false, "10.0.0.1")))},
			},
			want: []string{"upsert@1 demo/echo east:p1+", "upsert@2 demo/echo east:p1-"},
		},
		{
			name: "sources merge, and the pool goes with the last one",
			steps: []step{
				{source: "a", pool: echo(cluster("east", "eu", ep("p1", true, "10.0.0.1")))},
				{source: "b", pool: echo(cluster("west", "us", ep("p9", true, "10.1.0.9")))},
				{source: "a", pool: echo(), del: true},
				{source: "a", pool: echo(), del: true},
				{source: "b", pool: echo(), del: true},
			},
			want: []string{"upsert@1 demo/echo east:p1+", "upsert@2 demo/echo east:p1+ west:p9+", "upsert@3 demo/echo west:p9+", "delete@4 demo/echo"},
		},
		{
			name: "the first source by name wins an instance id and a label",
			steps: []step{
				{source: "b", pool: pool("demo", "echo", map[string]string{"app": "b"}, cluster("east", "eu", ep("p1", false, "10.0.0.1")))},
				{source: "a", pool: pool("demo", "echo", map[string]string{"app": "a"}, cluster("east", "eu", ep("p1", true, "10.0.0.1"), ep("p0", true, "10.0.0.5")))},
			},
			want: []string{"upsert@1 demo/echo east:p1- app=b", "upsert@2 demo/echo east:p0+p1+ app=a"},
		},
		{
			name: "a source that gives what another gives changes nothing",
			steps: []step{
				{source: "a", pool: echo(cluster("east", "eu", ep("p1", true, "10.0.0.1")))},
				{source: "b", pool: echo(cluster("east", "eu", ep("p1", true, "10.0.0.1")))},
			},
			want: []string{"upsert@1 demo/echo east:p1+"},
		},
		{
			name:  "deleting what is not there is no change",
			steps: []step{{source: "a", pool: echo(), del: true}},
		},
		{
			name: "replacing a source's whole state removes what it no longer has",
			steps: []step{
				{source: "a", pool: pool("demo", "one", nil, cluster("east", "eu", ep("p1", true, "10.0.0.1")))},
				{source: "a", pool: pool("demo", "two", nil, cluster("east", "eu", ep("p2", true, "10.0.0.2")))},
				{source: "b", pool: pool("demo", "two", nil, cluster("west", "us", ep("p3", true, "10.1.0.3")))},
				{source: "a", isAll: true, all: []discoveryv1.Pool{
					pool("demo", "two", nil, cluster("east", "eu", ep("p2", true, "10.0.0.2"))),
					pool("demo", "three", nil, cluster("east", "eu", ep("p4", true, "10.0.0.4"))),
				}},
			},
			want: []string{
				"upsert@1 demo/one east:p1+", "upsert@2 demo/two east:p2+", "upsert@3 demo/two east:p2+ west:p3+",
				"delete@4 demo/one", "upsert@5 demo/three east:p4+",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := New(Options{Base: base})
			w, initial := st.Watch(0)
			t.Cleanup(w.Stop)
			if diff := cmp.Diff([]string{"synced@0"}, briefs(initial)); diff != "" {
				t.Fatalf("initial events (-want +got):\n%s", diff)
			}
			for _, s := range tt.steps {
				s.apply(st)
			}
			if diff := cmp.Diff(tt.want, drain(w)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if got, want := st.Revision(), base+int64(len(tt.want)); got != want {
				t.Errorf("revision %d, want %d", got, want)
			}
		})
	}
}

func briefs(es []*Event) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, brief(e))
	}
	return out
}

func TestWatchFrom(t *testing.T) {
	st := New(Options{Base: base, History: 3})
	for i := range 4 {
		st.Replace("a", pool("demo", fmt.Sprintf("p%d", i), nil, cluster("east", "", ep("x", true, "10.0.0.1"))))
	}
	st.Replace("a", pool("demo", "p0", nil, cluster("east", "", ep("x", false, "10.0.0.1"))))
	st.Delete("a", Key{"demo", "p1"})
	st.Replace("a", pool("demo", "p2", nil, cluster("east", "", ep("y", true, "10.0.0.1"))))
	st.Replace("a", pool("demo", "p3", nil, cluster("east", "", ep("z", true, "10.0.0.1"))))
	// 8 changes; with History 3 the store keeps between 3 and 6 of them.
	hs := st.Stats().HistoryStart - base
	if hs < 2 || hs > 5 {
		t.Fatalf("history starts after revision %d", hs)
	}
	snapshot := []string{"snapshot@5 demo/p0 east:x-", "snapshot@7 demo/p2 east:y+", "snapshot@8 demo/p3 east:z+", "synced@8"}
	tests := []struct {
		name string
		from int64
		want []string
	}{
		{"no revision: snapshot and synced", 0, snapshot},
		{"the current revision: nothing", base + 8, nil},
		{"within history: the changes after it", base + 6, []string{"upsert@7 demo/p2 east:y+", "upsert@8 demo/p3 east:z+"}},
		{"the start of history", st.Stats().HistoryStart, briefs(st.history)},
		{"older than history: reset and snapshot", st.Stats().HistoryStart - 1, append([]string{"reset@8"}, snapshot...)},
		{"newer than the store (another process): reset and snapshot", base + 9, append([]string{"reset@8"}, snapshot...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, initial := st.Watch(tt.from)
			defer w.Stop()
			got := briefs(initial)
			if tt.want == nil {
				tt.want = []string{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events from %d (-want +got):\n%s", tt.from-base, diff)
			}
		})
	}
}

// A watcher that does not read is cut off after its buffer fills, at a
// whole change; the store and the other watchers carry on.
func TestSlowWatcherIsCutOff(t *testing.T) {
	st := New(Options{Base: base, Buffer: 3})
	slow, _ := st.Watch(0)
	fast, _ := st.Watch(0)
	t.Cleanup(slow.Stop)
	t.Cleanup(fast.Stop)
	var fastGot []string
	for i := range 2 {
		st.Replace("a", pool("demo", fmt.Sprintf("p%d", i), nil))
		fastGot = append(fastGot, drain(fast)...)
	}
	// A change of two pools does not fit the one free slot: the slow
	// watcher gets neither.
	st.ReplaceSource("a", []discoveryv1.Pool{pool("demo", "p0", nil), pool("demo", "p1", nil), pool("demo", "p2", nil), pool("demo", "p3", nil)})
	fastGot = append(fastGot, drain(fast)...)
	select {
	case <-slow.CutOff():
	default:
		t.Fatal("the slow watcher was not cut off")
	}
	if diff := cmp.Diff([]string{"upsert@1 demo/p0", "upsert@2 demo/p1"}, drain(slow)); diff != "" {
		t.Errorf("the slow watcher's events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"upsert@1 demo/p0", "upsert@2 demo/p1", "upsert@3 demo/p2", "upsert@4 demo/p3"}, fastGot); diff != "" {
		t.Errorf("the fast watcher's events (-want +got):\n%s", diff)
	}
	if got := st.Stats(); got.Watchers != 1 || got.CutOffs != 1 {
		t.Errorf("stats %+v, want 1 watcher and 1 cut-off", got)
	}
	// It resumes from its last revision without a snapshot.
	w, initial := st.Watch(base + 2)
	defer w.Stop()
	if diff := cmp.Diff([]string{"upsert@3 demo/p2", "upsert@4 demo/p3"}, briefs(initial)); diff != "" {
		t.Errorf("resumed events (-want +got):\n%s", diff)
	}
}

func TestGetListStats(t *testing.T) {
	st := New(Options{Base: base})
	st.Replace("a", pool("b", "two", map[string]string{"app": "x"}, cluster("east", "eu", ep("p1", true, "10.0.0.1"), ep("p2", true, "10.0.0.2"))))
	st.Replace("a", pool("a", "one", nil, cluster("west", "us", ep("p3", true, "10.1.0.3"))))
	st.Replace("a", pool("b", "one", nil))
	rev, all := st.List(nil)
	var keys []string
	for _, p := range all {
		keys = append(keys, KeyOf(p).String())
	}
	if diff := cmp.Diff([]string{"a/one", "b/one", "b/two"}, keys); diff != "" || rev != base+3 {
		t.Errorf("List: revision %d, keys (-want +got):\n%s", rev-base, diff)
	}
	_, some := st.List(func(p *discoveryv1.Pool) bool { return p.Labels["app"] == "x" })
	if len(some) != 1 || some[0].Name != "two" {
		t.Errorf("filtered List: %v", some)
	}
	p, ok := st.Get(Key{"b", "two"})
	if !ok || p.Revision != base+1 || len(p.Clusters[0].Endpoints) != 2 {
		t.Errorf("Get: %+v %v", p, ok)
	}
	if _, ok := st.Get(Key{"b", "three"}); ok {
		t.Error("Get of a missing pool succeeded")
	}
	if s := st.Stats(); s.Pools != 3 || s.Endpoints != 3 {
		t.Errorf("stats %+v, want 3 pools and 3 endpoints", s)
	}
	st.Delete("a", Key{"b", "two"})
	if s := st.Stats(); s.Pools != 2 || s.Endpoints != 1 {
		t.Errorf("after a delete: stats %+v, want 2 pools and 1 endpoint", s)
	}
}

// The store owns its copy: a source that reuses its slices changes nothing
// served.
func TestReplaceCopies(t *testing.T) {
	st := New(Options{Base: base})
	p := pool("demo", "echo", map[string]string{"app": "x"}, cluster("east", "eu", ep("p1", true, "10.0.0.1")))
	st.Replace("a", p)
	p.Labels["app"] = "y"
	p.Clusters[0].Endpoints[0].Addresses[0] = "10.9.9.9"
	p.Clusters[0].Endpoints[0].Ready = false
	got, _ := st.Get(Key{"demo", "echo"})
	if got.Labels["app"] != "x" || got.Clusters[0].Endpoints[0].Addresses[0] != "10.0.0.1" || !got.Clusters[0].Endpoints[0].Ready {
		t.Errorf("the stored pool changed with the caller's: %+v", got)
	}
}

func TestEventJSON(t *testing.T) {
	st := New(Options{Base: base})
	w, _ := st.Watch(0)
	defer w.Stop()
	st.Replace("a", pool("demo", "echo", nil, cluster("east", "eu", discoveryv1.Endpoint{
		InstanceID: "p1", Addresses: []string{"10.0.0.1"}, Ready: true, Serving: true,
		Ports: []discoveryv1.Port{{Name: "metrics", Port: 9090, Protocol: "TCP"}, {Name: "http", Port: 8080, Protocol: "TCP"}},
	})))
	st.Delete("a", Key{"demo", "echo"})
	want := []string{
		`{"type":"upsert","revision":1001,"pool":{"namespace":"demo","name":"echo","revision":1001,"clusters":[{"cluster":"east","region":"eu","endpoints":[{"instanceID":"p1","addresses":["10.0.0.1"],"ports":[{"name":"http","port":8080,"protocol":"TCP"},{"name":"metrics","port":9090,"protocol":"TCP"}],"ready":true,"serving":true,"terminating":false}]}]}}`,
		`{"type":"delete","revision":1002,"pool":{"namespace":"demo","name":"echo","revision":0,"clusters":[]}}`,
	}
	for i, wantJSON := range want {
		e := <-w.C()
		if got := string(e.JSON()); got != wantJSON {
			t.Errorf("event %d:\n got %s\nwant %s", i, got, wantJSON)
		}
		var back discoveryv1.Event
		if err := json.Unmarshal(e.JSON(), &back); err != nil {
			t.Errorf("event %d does not decode: %v", i, err)
		}
	}
}
