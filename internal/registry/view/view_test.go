package view

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/keyspace"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// log is a tiny store stand-in: it numbers writes and keeps the current
// key-value state, so a test can compare incremental and loaded views.
type log struct {
	rev  int64
	data map[string]store.KV
}

func (l *log) put(t testing.TB, key string, m proto.Message) store.Event {
	t.Helper()
	var b []byte
	switch v := m.(type) {
	case nil:
		b = keyspace.EncodeLease(1)
	default:
		var err error
		if b, err = proto.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	l.rev++
	kv := store.KV{Key: key, Value: b, ModRevision: l.rev}
	l.data[key] = kv
	return store.Event{Type: store.EventPut, KV: kv}
}

func (l *log) del(key string) store.Event {
	l.rev++
	delete(l.data, key)
	return store.Event{Type: store.EventDelete, KV: store.KV{Key: key, ModRevision: l.rev}}
}

func (l *log) kvs() []store.KV {
	var out []store.KV
	for _, kv := range l.data {
		out = append(out, kv)
	}
	return out
}

func exp(cluster string, minute int, portName string) *registryv1.Export {
	return &registryv1.Export{
		Key:           &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: cluster},
		ExportedSince: timestamppb.New(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC)),
		Type:          "ClusterSetIP",
		Ports:         []*registryv1.ServicePort{{Name: portName, Protocol: "TCP", Port: 80}},
		IpFamilies:    []string{"IPv4"},
	}
}

func chunk(cluster, name, portName string, addrs ...string) *registryv1.EndpointChunk {
	c := &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: "demo", Name: "echo", ClusterId: cluster, Chunk: name},
		AddressType: "IPv4",
		Ports:       []*registryv1.EndpointPort{{Name: portName, Protocol: "TCP", Port: 8080}},
	}
	for _, a := range addrs {
		c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{Addresses: []string{a}})
	}
	return c
}

// kinds names events: "import", "chunk:a/a1", ..., with "@" and the
// audience when it is not everyone, and "!" for a retraction.
func kinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		n := len(out)
		switch e.GetEvent().(type) {
		case *registryv1.WatchEvent_ImportUpsert:
			out = append(out, "import")
		case *registryv1.WatchEvent_ImportDelete:
			out = append(out, "import-delete")
		case *registryv1.WatchEvent_EndpointsUpsert:
			out = append(out, "chunk:"+e.GetEndpointsUpsert().GetKey().GetClusterId()+"/"+e.GetEndpointsUpsert().GetKey().GetChunk())
		case *registryv1.WatchEvent_EndpointsDelete:
			out = append(out, "chunk-delete:"+e.GetEndpointsDelete().GetClusterId()+"/"+e.GetEndpointsDelete().GetChunk())
		case *registryv1.WatchEvent_ExportStatus:
			out = append(out, "status:"+e.GetExportStatus().GetKey().GetClusterId())
		case *registryv1.WatchEvent_ExportStatusDelete:
			out = append(out, "status-delete:"+e.GetExportStatusDelete().GetClusterId())
		}
		if len(out) > n {
			if e.Retract {
				out[n] += "!"
			}
			if !e.Audience.IsEveryone() {
				out[n] += "@" + e.Audience.String()
			}
		}
	}
	return out
}

// sentTo is the canonical chunk id of s as cluster is sent it, nil when
// it is not.
func (v *View) sentTo(cluster string, s svcKey, id chunkID) *registryv1.EndpointChunk {
	for _, g := range v.groups[s] {
		if g.aud.Includes(cluster) {
			return g.canon[id]
		}
	}
	return nil
}

// applyTo applies store events to v and names the watch events it
// returns, checking that each carries the revision of its cause.
func applyTo(t *testing.T, v *View, l *log, evs ...store.Event) []string {
	t.Helper()
	out, err := v.Apply(evs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		if e.GetRevision() != l.rev && len(evs) == 1 {
			t.Errorf("event at revision %d, want %d", e.GetRevision(), l.rev)
		}
	}
	return kinds(out)
}

func expectEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n  %v\nwant\n  %v", got, want)
	}
}

func TestViewEmitsTheSmallestChange(t *testing.T) {
	l := &log{data: map[string]store.KV{}}
	v := New()
	apply := func(evs ...store.Event) []string { t.Helper(); return applyTo(t, v, l, evs...) }
	expect := func(got []string, want ...string) { t.Helper(); expectEvents(t, got, want...) }

	for _, id := range []string{"a", "b"} {
		expect(apply(l.put(t, keyspace.ClusterKey(id), &registryv1.Cluster{Id: id, ClustersetId: "fleet", Region: "r-" + id})))
		expect(apply(l.put(t, keyspace.LiveKey(id), nil)))
	}
	expect(apply(l.put(t, keyspace.ExportKey(exp("a", 0, "http").Key), exp("a", 0, "http"))), "status:a", "import")
	expect(apply(l.put(t, keyspace.ChunkKey(chunk("a", "a1", "http").Key), chunk("a", "a1", "http", "10.0.0.1"))), "status:a", "chunk:a/a1")
	// b names its port "web": served under "http", with a Port conflict
	// that both exports report.
	expect(apply(l.put(t, keyspace.ExportKey(exp("b", 1, "web").Key), exp("b", 1, "web"))), "status:a", "status:b", "import")
	expect(apply(l.put(t, keyspace.ChunkKey(chunk("b", "b1", "web").Key), chunk("b", "b1", "web", "10.1.0.1"))), "status:b", "chunk:b/b1")
	if c := v.sentTo(Admins, svcKey{"demo", "echo"}, chunkID{"b", "b1"}); c.GetPorts()[0].GetName() != "http" || c.GetPorts()[0].GetPort() != 8080 {
		t.Errorf("b's chunk is served as %v, want http/8080", c.GetPorts())
	}
	if st := v.statuses[svcKey{"demo", "echo"}]["b"]; len(st.GetConflicts()) != 1 || st.GetConflicts()[0].GetReason() != "Port" {
		t.Errorf("b's status = %v, want one Port conflict", st)
	}

	// One endpoint changes: one chunk event (and the exporter's status).
	expect(apply(l.put(t, keyspace.ChunkKey(chunk("a", "a1", "http").Key), chunk("a", "a1", "http", "10.0.0.1", "10.0.0.2"))), "status:a", "chunk:a/a1")
	// Rewriting the same content changes only the generation in the status.
	expect(apply(l.put(t, keyspace.ChunkKey(chunk("a", "a1", "http").Key), chunk("a", "a1", "http", "10.0.0.1", "10.0.0.2"))), "status:a")

	// b's lease expires: it leaves the import, its chunk goes, and the
	// conflict ends for a too.
	expect(apply(l.del(keyspace.LiveKey("b"))), "status:a", "status:b", "import", "chunk-delete:b/b1")
	// It returns.
	expect(apply(l.put(t, keyspace.LiveKey("b"), nil)), "status:a", "status:b", "import", "chunk:b/b1")

	// A loaded view equals the incrementally built one.
	loaded := New()
	if err := loaded.Load(l.kvs(), l.rev); err != nil {
		t.Fatal(err)
	}
	a, b := v.Snapshot("*"), loaded.Snapshot("*")
	if len(a) != len(b) {
		t.Fatalf("snapshots differ in length: %d vs %d", len(a), len(b))
	}
	for i := range a {
		if !proto.Equal(a[i].WatchEvent, b[i].WatchEvent) {
			t.Fatalf("snapshots differ at %d:\n%v\n%v", i, a[i], b[i])
		}
	}

	// a, the oldest, unexports: b's names take over; b's chunk is renamed.
	expect(apply(l.del(keyspace.ExportKey(exp("a", 0, "http").Key))), "status-delete:a", "status:b", "import", "chunk-delete:a/a1", "chunk:b/b1")
	expect(apply(l.del(keyspace.ExportKey(exp("b", 1, "web").Key))), "status-delete:b", "chunk-delete:b/b1", "import-delete")
}

func scoped(e *registryv1.Export, to ...string) *registryv1.Export {
	e.ExportTo = to
	return e
}

// TestViewScopesExports shows fleetnet.dev/export-to in the registry's
// stream: an export's endpoints go only to its scope (and its own
// cluster), and each cluster is sent the merge of the exports it may see;
// a scope that shrinks retracts what its former members hold, one that
// grows sends it to the clusters it gained; a loaded view has the same
// audiences.
func TestViewScopesExports(t *testing.T) {
	l := &log{data: map[string]store.KV{}}
	v := New()
	apply := func(evs ...store.Event) []string { t.Helper(); return applyTo(t, v, l, evs...) }
	expect := func(got []string, want ...string) { t.Helper(); expectEvents(t, got, want...) }
	for _, id := range []string{"a", "b", "c"} {
		apply(l.put(t, keyspace.ClusterKey(id), &registryv1.Cluster{Id: id, ClustersetId: "fleet"}))
		apply(l.put(t, keyspace.LiveKey(id), nil))
	}
	svc := svcKey{"demo", "echo"}

	// a exports to b only.
	expect(apply(l.put(t, keyspace.ExportKey(exp("a", 0, "http").Key), scoped(exp("a", 0, "http"), "b"))), "status:a", "import@only a,b,(admins)")
	if by := v.statuses[svc]["a"].GetImportedBy(); strings.Join(by, ",") != "b" {
		t.Errorf("a's status imported_by = %v, want [b]", by)
	}
	expect(apply(l.put(t, keyspace.ChunkKey(chunk("a", "a1", "http").Key), chunk("a", "a1", "http", "10.0.0.1"))), "status:a", "chunk:a/a1@only a,b,(admins)")
	if got := v.ImportsFor("c"); len(got) != 0 {
		t.Errorf("ImportsFor(c) = %v, want none", got)
	}
	// c exports to everyone: a, b and the administrators are sent the
	// merge of both exports, everyone else c's alone, which names neither
	// a nor its chunk.
	expect(apply(l.put(t, keyspace.ExportKey(exp("c", 1, "http").Key), exp("c", 1, "http"))),
		"status:c", "import@only a,b,(admins)", "import@all but a,b,(admins)")
	if imp := v.ImportsFor("d"); len(imp) != 1 || len(imp[0].GetClusters()) != 1 || imp[0].GetClusters()[0].GetClusterId() != "c" {
		t.Errorf("ImportsFor(d) = %v, want the import of c's export alone", imp)
	}
	// a's scope moves from b to c: c is sent the merge with a and a's
	// chunk, b the merge without a and the deletion of a's chunk.
	expect(apply(l.put(t, keyspace.ExportKey(exp("a", 0, "http").Key), scoped(exp("a", 0, "http"), "c"))),
		"status:a", "import@only c", "import@only b", "chunk-delete:a/a1@only b", "chunk:a/a1@only c")
	// c unexports: the import is a's alone again, retracted from everyone
	// outside a's scope.
	expect(apply(l.del(keyspace.ExportKey(exp("c", 1, "http").Key))), "status-delete:c", "import-delete!@all but a,c,(admins)", "import@only a,c,(admins)")
	// b registers later into a scope: nothing to send (not in it); c's
	// lease lapses: a's status no longer names c.
	expect(apply(l.del(keyspace.LiveKey("c"))), "status:a")
	if by := v.statuses[svc]["a"].GetImportedBy(); len(by) != 0 {
		t.Errorf("a's status imported_by = %v after c's lease lapsed, want none", by)
	}

	// A loaded view sends the same events to the same audiences.
	loaded := New()
	if err := loaded.Load(l.kvs(), l.rev); err != nil {
		t.Fatal(err)
	}
	if a, b := kinds(v.Snapshot("*")), kinds(loaded.Snapshot("*")); strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("snapshots differ:\n  %v\n  %v", a, b)
	}
	expect(kinds(loaded.Snapshot("")), "import@only a,c,(admins)", "chunk:a/a1@only a,c,(admins)")
}

// TestViewMergesOnlyWhatEachClusterMaySee: an import's metadata (its
// clusters, ports, conflicts) and its canonical chunks are the merge of
// the exports the receiving cluster may see, so a cluster outside a scope
// never reads the scoped exporter's name, not even in a conflict, and an
// exporter's status reports only the conflicts among the exports its own
// cluster sees.
func TestViewMergesOnlyWhatEachClusterMaySee(t *testing.T) {
	l := &log{data: map[string]store.KV{}}
	v := New()
	apply := func(evs ...store.Event) []string { t.Helper(); return applyTo(t, v, l, evs...) }
	for _, id := range []string{"a", "b", "c", "d"} {
		apply(l.put(t, keyspace.ClusterKey(id), &registryv1.Cluster{Id: id, ClustersetId: "fleet", Region: "r-" + id}))
		apply(l.put(t, keyspace.LiveKey(id), nil))
	}
	svc := svcKey{"demo", "echo"}
	// a, the oldest, names its port "http" and exports to b only; c names
	// it "web" and exports to everyone.
	apply(l.put(t, keyspace.ExportKey(exp("a", 0, "http").Key), scoped(exp("a", 0, "http"), "b")))
	apply(l.put(t, keyspace.ChunkKey(chunk("a", "a1", "http").Key), chunk("a", "a1", "http", "10.0.0.1")))
	apply(l.put(t, keyspace.ExportKey(exp("c", 1, "web").Key), exp("c", 1, "web")))
	apply(l.put(t, keyspace.ChunkKey(chunk("c", "c1", "web").Key), chunk("c", "c1", "web", "10.2.0.1")))

	clustersOf := func(imp *registryv1.Import) string {
		var ids []string
		for _, c := range imp.GetClusters() {
			ids = append(ids, c.GetClusterId())
		}
		return strings.Join(ids, ",")
	}
	for _, tc := range []struct {
		viewer                 string
		clusters, port, c1Port string
		conflicts              int
		a1                     bool
	}{
		// b sees both: a's port name wins (oldest), the conflict names both.
		{viewer: "b", clusters: "a,c", port: "http", c1Port: "http", conflicts: 1, a1: true},
		{viewer: Admins, clusters: "a,c", port: "http", c1Port: "http", conflicts: 1, a1: true},
		{viewer: "a", clusters: "a,c", port: "http", c1Port: "http", conflicts: 1, a1: true},
		// c and d do not see a: c's export alone, no conflict, c's names.
		{viewer: "c", clusters: "c", port: "web", c1Port: "web"},
		{viewer: "d", clusters: "c", port: "web", c1Port: "web"},
	} {
		imps := v.ImportsFor(tc.viewer)
		if len(imps) != 1 {
			t.Fatalf("%q is sent %d imports, want 1", tc.viewer, len(imps))
		}
		imp := imps[0]
		if got := clustersOf(imp); got != tc.clusters {
			t.Errorf("%q's import lists clusters %s, want %s", tc.viewer, got, tc.clusters)
		}
		if got := imp.GetPorts()[0].GetName(); got != tc.port {
			t.Errorf("%q's import names its port %q, want %q", tc.viewer, got, tc.port)
		}
		if len(imp.GetConflicts()) != tc.conflicts {
			t.Errorf("%q's import has conflicts %v, want %d", tc.viewer, imp.GetConflicts(), tc.conflicts)
		}
		if got := v.sentTo(tc.viewer, svc, chunkID{"c", "c1"}).GetPorts()[0].GetName(); got != tc.c1Port {
			t.Errorf("%q is sent c's chunk with port %q, want %q", tc.viewer, got, tc.c1Port)
		}
		if got := v.sentTo(tc.viewer, svc, chunkID{"a", "a1"}) != nil; got != tc.a1 {
			t.Errorf("%q is sent a's chunk: %v, want %v", tc.viewer, got, tc.a1)
		}
		// What a snapshot sends it says the same: one import, nothing of a
		// unless it may see a.
		var sent []*registryv1.Import
		for _, e := range v.Snapshot("") {
			if !e.Audience.Includes(tc.viewer) {
				continue
			}
			if imp := e.GetImportUpsert(); imp != nil {
				sent = append(sent, imp)
			}
			if ch := e.GetEndpointsUpsert(); ch != nil && ch.GetKey().GetClusterId() == "a" && !tc.a1 {
				t.Errorf("%q's snapshot holds a's chunk", tc.viewer)
			}
		}
		if len(sent) != 1 || clustersOf(sent[0]) != tc.clusters {
			t.Errorf("%q's snapshot holds imports %v, want one of clusters %s", tc.viewer, sent, tc.clusters)
		}
	}
	// Exporters' statuses: a sees c and reports the conflict; c does not
	// see a, so its status names no conflict (which would name a).
	if n := len(v.statuses[svc]["a"].GetConflicts()); n != 1 {
		t.Errorf("a's status has %d conflicts, want 1", n)
	}
	if cs := v.statuses[svc]["c"].GetConflicts(); len(cs) != 0 {
		t.Errorf("c's status has conflicts %v, which name a, scoped away from c", cs)
	}

	// A change of c's endpoints: one event per distinct content (the two
	// port names), each to its own clusters.
	expectEvents(t, apply(l.put(t, keyspace.ChunkKey(chunk("c", "c1", "web").Key), chunk("c", "c1", "web", "10.2.0.1", "10.2.0.2"))),
		"status:c", "chunk:c/c1@only a,b,(admins)", "chunk:c/c1@all but a,b,(admins)")
	// c's export names its port "http" too: the canonical chunks become
	// equal and are sent once; the imports differ only in their
	// clusters; a's conflict ends (c's status, which had none, stays).
	expectEvents(t, apply(l.put(t, keyspace.ExportKey(exp("c", 1, "http").Key), exp("c", 1, "http"))),
		"status:a", "import@only a,b,(admins)", "import@all but a,b,(admins)", "chunk:c/c1")

	loaded := New()
	if err := loaded.Load(l.kvs(), l.rev); err != nil {
		t.Fatal(err)
	}
	if a, b := kinds(v.Snapshot("*")), kinds(loaded.Snapshot("*")); strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("snapshots differ:\n  %v\n  %v", a, b)
	}
}

func TestAudienceIntersectUnion(t *testing.T) {
	abut := func(c ...string) Audience {
		m := map[string]bool{}
		for _, x := range c {
			m[x] = true
		}
		return allBut(m)
	}
	for _, tc := range []struct {
		a, b             Audience
		intersect, union string
	}{
		{Everyone(), Everyone(), "everyone", "everyone"},
		{Everyone(), Only("a"), "only a", "everyone"},
		{Only("a", "b"), Only("b", "c"), "only b", "only a,b,c"},
		{Only("a", "b"), abut("a"), "only b", "everyone"},
		{Only("a"), abut("a", "c"), "only ", "all but c"},
		{abut("a", "b"), abut("b", "c"), "all but a,b,c", "all but b"},
		{Only(), Only("a"), "only ", "only a"},
		{Only(Admins, "a"), abut(Admins), "only a", "everyone"},
	} {
		if got := tc.a.Intersect(tc.b).String(); got != tc.intersect {
			t.Errorf("%s ∩ %s = %s, want %s", tc.a, tc.b, got, tc.intersect)
		}
		if got := tc.a.Union(tc.b).String(); got != tc.union {
			t.Errorf("%s ∪ %s = %s, want %s", tc.a, tc.b, got, tc.union)
		}
	}
}

func TestAudienceMinus(t *testing.T) {
	for _, tc := range []struct {
		a, b Audience
		want string
	}{
		{Everyone(), Everyone(), "only "},
		{Everyone(), Only("a"), "all but a"},
		{Only("a", "b"), Everyone(), "only "},
		{Only("a", "b"), Only("b", "c"), "only a"},
		{allBut(map[string]bool{"a": true}), Only("b"), "all but a,b"},
		{allBut(map[string]bool{"a": true}), allBut(map[string]bool{"a": true, "b": true}), "only b"},
		{Only("a", "b"), allBut(map[string]bool{"a": true}), "only a"},
		{Everyone(), allBut(map[string]bool{"c": true}), "only c"},
	} {
		if got := tc.a.Minus(tc.b).String(); got != tc.want {
			t.Errorf("%s minus %s = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
	if !Only("a").Includes("a") || Only("a").Includes("b") || !Everyone().Includes("x") || allBut(map[string]bool{"a": true}).Includes("a") {
		t.Error("Includes is wrong")
	}
}

func selected(e *registryv1.Export, selector string, to ...string) *registryv1.Export {
	e.ExportToSelector = selector
	e.ExportTo = to
	return e
}

func clusterWith(id string, props ...string) *registryv1.Cluster {
	c := &registryv1.Cluster{Id: id, ClustersetId: "fleet"}
	for i := 0; i+1 < len(props); i += 2 {
		if c.Properties == nil {
			c.Properties = map[string]string{}
		}
		c.Properties[props[i]] = props[i+1]
	}
	return c
}

// TestViewScopesExportsBySelector shows fleetnet.dev/export-to-selector in
// the registry's stream: the clusters whose properties match are in the
// scope; a cluster whose properties change to match gets the import and
// the endpoints, one whose properties stop matching has them retracted;
// names and the selector unite; unscoped exports do not move; a loaded
// view has the same audiences.
func TestViewScopesExportsBySelector(t *testing.T) {
	l := &log{data: map[string]store.KV{}}
	v := New()
	apply := func(evs ...store.Event) []string { t.Helper(); return applyTo(t, v, l, evs...) }
	expect := func(got []string, want ...string) { t.Helper(); expectEvents(t, got, want...) }
	importedBy := func(want string) {
		t.Helper()
		if by := v.statuses[svcKey{"demo", "echo"}]["a"].GetImportedBy(); strings.Join(by, ",") != want {
			t.Errorf("a's status imported_by = %v, want [%s]", by, want)
		}
	}
	for _, c := range []*registryv1.Cluster{clusterWith("a", "env", "prod"), clusterWith("b", "env", "prod"), clusterWith("c", "env", "dev"), clusterWith("d")} {
		apply(l.put(t, keyspace.ClusterKey(c.GetId()), c))
		apply(l.put(t, keyspace.LiveKey(c.GetId()), nil))
	}

	// Another service, exported to everyone, is untouched by what follows.
	other := exp("d", 0, "http")
	other.Key.Name = "other"
	expect(apply(l.put(t, keyspace.ExportKey(other.Key), other)), "status:d", "import")

	// a exports echo to env=prod: b (and a itself), not c or d.
	expect(apply(l.put(t, keyspace.ExportKey(exp("a", 0, "http").Key), selected(exp("a", 0, "http"), "env=prod"))), "status:a", "import@only a,b,(admins)")
	importedBy("b")
	expect(apply(l.put(t, keyspace.ChunkKey(chunk("a", "a1", "http").Key), chunk("a", "a1", "http", "10.0.0.1"))), "status:a", "chunk:a/a1@only a,b,(admins)")
	if got := v.ImportsFor("c"); len(got) != 1 || got[0].GetKey().GetName() != "other" {
		t.Errorf("ImportsFor(c) = %v, want other alone", got)
	}
	if aud := v.ChunkAudience("demo", "echo", "a"); aud.String() != "only a,b" {
		t.Errorf("ChunkAudience = %s, want only a,b", aud)
	}

	// c becomes prod: the import and a's chunk go to c.
	expect(apply(l.put(t, keyspace.ClusterKey("c"), clusterWith("c", "env", "prod"))), "status:a", "import@only c", "chunk:a/a1@only c")
	importedBy("b,c")
	// And back: retracted from c alone.
	expect(apply(l.put(t, keyspace.ClusterKey("c"), clusterWith("c", "env", "dev"))),
		"status:a", "import-delete!@only c", "chunk-delete:a/a1!@only c")
	importedBy("b")
	// A property the selector does not look at changes nothing.
	expect(apply(l.put(t, keyspace.ClusterKey("b"), clusterWith("b", "env", "prod", "tier", "gold"))))

	// Names and the selector unite: d is named, b matches.
	expect(apply(l.put(t, keyspace.ExportKey(exp("a", 0, "http").Key), selected(exp("a", 0, "http"), "env=prod", "d"))),
		"status:a", "import@only d", "chunk:a/a1@only d")
	importedBy("b,d")
	// A named cluster stays in scope whatever its properties.
	expect(apply(l.put(t, keyspace.ClusterKey("d"), clusterWith("d", "env", "dev"))))

	// A cluster that registers matching is in scope at once, and in
	// imported_by once its lease is live.
	expect(apply(l.put(t, keyspace.ClusterKey("e"), clusterWith("e", "env", "prod"))), "import@only e", "chunk:a/a1@only e")
	expect(apply(l.put(t, keyspace.LiveKey("e"), nil)), "status:a")
	importedBy("b,d,e")
	// b's lease lapses: it stays in the scope (its record is kept for the
	// grace period) but leaves imported_by; deregistered, it leaves the
	// scope.
	expect(apply(l.del(keyspace.LiveKey("b"))), "status:a")
	importedBy("d,e")
	expect(apply(l.del(keyspace.ClusterKey("b"))), "import-delete!@only b", "chunk-delete:a/a1!@only b")

	// A loaded view sends the same events to the same audiences.
	loaded := New()
	if err := loaded.Load(l.kvs(), l.rev); err != nil {
		t.Fatal(err)
	}
	if a, b := kinds(v.Snapshot("*")), kinds(loaded.Snapshot("*")); strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("snapshots differ:\n  %v\n  %v", a, b)
	}
}

// TestScopeAudience: which registered clusters a scope includes, by the
// selector's operators, with names, and when the selector does not parse.
func TestScopeAudience(t *testing.T) {
	clusters := map[string]*registryv1.Cluster{}
	for _, c := range []*registryv1.Cluster{
		clusterWith("a", "env", "prod", "tier", "gold"),
		clusterWith("b", "env", "prod"),
		clusterWith("c", "env", "dev", "tier", "gold"),
		clusterWith("d"),
	} {
		clusters[c.GetId()] = c
	}
	for _, tc := range []struct {
		selector string
		to       []string
		want     string
	}{
		{"", nil, "everyone"},
		{"", []string{"c"}, "only c,x"},
		{"env=prod", nil, "only a,b,x"},
		{"env==prod,tier=gold", nil, "only a,x"},
		{"env in (prod,dev)", nil, "only a,b,c,x"},
		{"env notin (prod)", nil, "only c,d,x"},
		{"env!=prod", nil, "only c,d,x"},
		{"tier", nil, "only a,c,x"},
		{"!tier", nil, "only b,d,x"},
		{"env=staging", nil, "only x"},
		{"env=dev", []string{"b"}, "only b,c,x"},
		{"env<3", nil, "only x"}, // refused by the registry; matches nothing here
	} {
		e := selected(exp("x", 0, "http"), tc.selector, tc.to...)
		if got := newScope("x", e).audience(clusters).String(); got != tc.want {
			t.Errorf("selector %q, export_to %v: audience %s, want %s", tc.selector, tc.to, got, tc.want)
		}
	}
}

// An exporting cluster's network and east-west gateway reach every
// importer with its imports, and follow its registration.
func TestImportsCarryTheExportersNetworkAndGateway(t *testing.T) {
	l := &log{data: map[string]store.KV{}}
	v := New()
	apply := func(evs ...store.Event) []string { t.Helper(); return applyTo(t, v, l, evs...) }
	west := func(gw string) *registryv1.Cluster {
		return &registryv1.Cluster{Id: "west", ClustersetId: "fleet", Properties: map[string]string{keys.PropertyNetwork: "b"}, EastwestGateway: gw}
	}
	apply(l.put(t, keyspace.ClusterKey("east"), &registryv1.Cluster{Id: "east", ClustersetId: "fleet"}))
	apply(l.put(t, keyspace.ClusterKey("west"), west("192.0.2.2:15008")))
	for _, id := range []string{"east", "west"} {
		apply(l.put(t, keyspace.LiveKey(id), nil))
	}
	apply(l.put(t, keyspace.ExportKey(exp("east", 0, "http").Key), exp("east", 0, "http")))
	apply(l.put(t, keyspace.ExportKey(exp("west", 1, "http").Key), exp("west", 1, "http")))
	clusters := func() map[string]*registryv1.ImportCluster {
		t.Helper()
		g := v.groups[svcKey{"demo", "echo"}]
		if len(g) != 1 {
			t.Fatalf("%d groups, want 1", len(g))
		}
		out := map[string]*registryv1.ImportCluster{}
		for _, c := range g[0].imp.GetClusters() {
			out[c.GetClusterId()] = c
		}
		return out
	}
	if c := clusters(); c["west"].GetNetwork() != "b" || c["west"].GetEastwestGateway() != "192.0.2.2:15008" || c["east"].GetNetwork() != "" || c["east"].GetEastwestGateway() != "" {
		t.Fatalf("import clusters = %v", c)
	}
	// west's gateway moves: its import follows.
	expectEvents(t, apply(l.put(t, keyspace.ClusterKey("west"), west("192.0.2.3:15008"))), "import")
	if c := clusters(); c["west"].GetEastwestGateway() != "192.0.2.3:15008" {
		t.Fatalf("west = %v after its gateway moved", c["west"])
	}
}
