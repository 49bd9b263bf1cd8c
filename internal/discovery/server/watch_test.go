package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/google/go-cmp/cmp"
)

// base is the test store's revision before any change.
const base = 1000

// watchStream reads a watch's newline-delimited events as they come.
type watchStream struct {
	resp   *http.Response
	events chan discoveryv1.Event
	// ended is closed when the server ended the stream.
	ended chan struct{}
}

func openWatch(t *testing.T, env *discoverytest.Env, query string, header ...string) *watchStream {
	t.Helper()
	req, err := http.NewRequest("GET", env.URL+"/v1/watch"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+discoverytest.ReadToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := env.HTTPClient(t, nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("watch%s: %d %s", query, resp.StatusCode, b)
	}
	ws := &watchStream{resp: resp, events: make(chan discoveryv1.Event, 10000), ended: make(chan struct{})}
	go func() {
		defer close(ws.ended)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var e discoveryv1.Event
			if err := json.Unmarshal(line, &e); err != nil {
				panic(fmt.Sprintf("undecodable event %q", line))
			}
			ws.events <- e
		}
	}()
	// Closing the body validates what was read against the document.
	t.Cleanup(func() { resp.Body.Close(); <-ws.ended })
	return ws
}

// next returns the next n events, briefly: "type@revision namespace/name".
func (ws *watchStream) next(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case e := <-ws.events:
			out = append(out, brief(e))
		case <-timeout:
			t.Fatalf("waited 10s for %d events, got %v", n, out)
		}
	}
	return out
}

func brief(e discoveryv1.Event) string {
	s := fmt.Sprintf("%s@%d", e.Type, e.Revision-base)
	if e.Pool != nil {
		s += " " + e.Pool.Namespace + "/" + e.Pool.Name
	}
	return s
}

// eightChanges brings a server with a history of 3 to revision 8, with
// changes 5 to 8 in its history (the store trims in bulk: it keeps from 3
// to 6 changes).
func eightChanges(t *testing.T, env *discoverytest.Env) {
	t.Helper()
	echo := register(t, env, discoverytest.Registration("demo", "echo", "east", "eu", "e1"))
	register(t, env, discoverytest.Registration("demo", "cache", "east", "eu", "c1"))
	register(t, env, discoverytest.Registration("demo", "echo", "west", "us", "w1"))
	call(t, env, nil, discoverytest.RegisterToken, "DELETE", "/v1/registrations/"+echo.ID, nil)
	register(t, env, discoverytest.Registration("ml", "model", "west", "us", "m1"))
	env.Clock.Step(time.Minute)
	env.Memory.Expire()
	if got := env.Store.Revision(); got != base+8 {
		t.Fatalf("at revision %d, want %d", got-base, 8)
	}
}

func TestWatch(t *testing.T) {
	t.Run("a snapshot, a synced mark, then every change", func(t *testing.T) {
		env := discoverytest.Start(t, discoverytest.Options{})
		echo := register(t, env, discoverytest.Registration("demo", "echo", "east", "eu", "e1"))
		register(t, env, discoverytest.Registration("demo", "cache", "east", "eu", "c1"))
		ws := openWatch(t, env, "")
		if diff := cmp.Diff([]string{"snapshot@2 demo/cache", "snapshot@1 demo/echo", "synced@2"}, ws.next(t, 3)); diff != "" {
			t.Errorf("start (-want +got):\n%s", diff)
		}
		register(t, env, discoverytest.Registration("demo", "echo", "west", "us", "w1"))
		call(t, env, nil, discoverytest.RegisterToken, "DELETE", "/v1/registrations/"+echo.ID, nil)
		register(t, env, discoverytest.Registration("ml", "model", "west", "us", "m1"))
		env.Clock.Step(time.Minute)
		env.Memory.Expire()
		want := []string{
			"upsert@3 demo/echo", "upsert@4 demo/echo", "upsert@5 ml/model",
			"delete@6 demo/cache", "delete@7 demo/echo", "delete@8 ml/model",
		}
		if diff := cmp.Diff(want, ws.next(t, 6)); diff != "" {
			t.Errorf("changes (-want +got):\n%s", diff)
		}
	})

	tests := []struct {
		name, query string
		header      []string
		want        []string
	}{
		{"within history: what changed since", "?revision=" + rev(5), nil, []string{"delete@6 demo/cache", "delete@7 demo/echo", "delete@8 ml/model"}},
		{"the current revision: nothing until a change", "?revision=" + rev(8), nil, nil},
		{"older than history: reset, then a snapshot", "?revision=" + rev(3), nil, []string{"reset@8", "synced@8"}},
		{"from another process (newer than the store): reset", "?revision=" + rev(99), nil, []string{"reset@8", "synced@8"}},
		{"revision 0: a snapshot", "?revision=0", nil, []string{"synced@8"}},
		{"Last-Event-ID resumes", "", []string{"Last-Event-ID", rev(7)}, []string{"delete@8 ml/model"}},
		{"the query wins over Last-Event-ID", "?revision=" + rev(6), []string{"Last-Event-ID", rev(7)}, []string{"delete@7 demo/echo", "delete@8 ml/model"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := discoverytest.Start(t, discoverytest.Options{History: 3})
			eightChanges(t, env)
			ws := openWatch(t, env, tt.query, tt.header...)
			got := ws.next(t, len(tt.want))
			// The next change comes right after: nothing else was sent.
			register(t, env, discoverytest.Registration("demo", "probe", "east", "eu", "p1"))
			got = append(got, ws.next(t, 1)...)
			if diff := cmp.Diff(append(tt.want, "upsert@9 demo/probe"), got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func rev(r int64) string { return strconv.FormatInt(base+r, 10) }

func TestWatchServerSentEvents(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{})
	register(t, env, discoverytest.Registration("demo", "echo", "east", "eu", "e1"))
	// read opens a watch with header, registers pool once the watch is
	// established and returns the events up to the pool's. A watch from the
	// start is established at its synced event (the answer's headers come
	// before the snapshot is taken); a resumed one at once, as the store
	// still holds the changes since its revision.
	read := func(t *testing.T, pool string, header ...string) []discoverytest.SSEEvent {
		t.Helper()
		req, _ := http.NewRequest("GET", env.URL+"/v1/watch", nil)
		req.Header.Set("Authorization", "Bearer "+discoverytest.ReadToken)
		req.Header.Set("Accept", "text/html;q=0.5, text/event-stream")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := env.HTTPClient(t, nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("%d %s", resp.StatusCode, ct)
		}
		resumed := len(header) > 0
		// Read up to the next registration's event.
		var raw strings.Builder
		done := make(chan error, 1)
		established := make(chan struct{})
		if resumed {
			close(established)
		}
		go func() {
			r := bufio.NewReader(resp.Body)
			for {
				line, err := r.ReadString('\n')
				raw.WriteString(line)
				if err != nil {
					done <- err
					return
				}
				if !resumed && line == "event: synced\n" {
					close(established)
				}
				if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"name":"`+pool+`"`) {
					// The blank line that ends the event.
					line, _ = r.ReadString('\n')
					raw.WriteString(line)
					done <- nil
					return
				}
			}
		}()
		select {
		case <-established:
		case err := <-done:
			t.Fatalf("stream ended before its synced event: %v\n%s", err, raw.String())
		case <-time.After(10 * time.Second):
			t.Fatalf("no synced event:\n%s", raw.String())
		}
		register(t, env, discoverytest.Registration("demo", pool, "east", "eu", "o1"))
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("reading events: %v\n%s", err, raw.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no upsert event:\n%s", raw.String())
		}
		resp.Body.Close() // validates what was read against the document
		events, err := discoverytest.ParseSSE(strings.NewReader(raw.String()))
		if err != nil {
			t.Fatal(err)
		}
		return events
	}
	events := read(t, "other")
	want := []discoverytest.SSEEvent{
		{Event: "snapshot", Data: `{"type":"snapshot","revision":1001,"pool":{`},
		{ID: rev(1), Event: "synced", Data: `{"type":"synced","revision":1001}`},
		{ID: rev(2), Event: "upsert", Data: `{"type":"upsert","revision":1002,"pool":{"namespace":"demo","name":"other"`},
	}
	if len(events) != len(want) {
		t.Fatalf("events %+v", events)
	}
	for i := range want {
		if events[i].ID != want[i].ID || events[i].Event != want[i].Event || !strings.HasPrefix(events[i].Data, want[i].Data) {
			t.Errorf("event %d: %+v, want %+v", i, events[i], want[i])
		}
	}
	// A browser's EventSource reconnects with the last id.
	events = read(t, "third", "Last-Event-ID", rev(1))
	if len(events) != 2 || events[0].Event != "upsert" || events[0].ID != rev(2) || events[1].Event != "upsert" || events[1].ID != rev(3) {
		t.Errorf("resumed: %+v", events)
	}
}

// A watch narrowed by a selector gets a delete when a pool stops matching,
// and bookmarks carry the revision past changes it did not get.
func TestWatchFilter(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{BookmarkInterval: 20 * time.Millisecond})
	echoReg := discoverytest.Registration("demo", "echo", "east", "eu", "e1")
	echoReg.Labels = map[string]string{"app": "echo"}
	echo := register(t, env, echoReg)
	register(t, env, discoverytest.Registration("demo", "cache", "east", "eu", "c1"))
	register(t, env, discoverytest.Registration("ml", "model", "west", "us", "m1"))

	ws := openWatch(t, env, "?namespace=demo&labelSelector=app%3Decho")
	if diff := cmp.Diff([]string{"snapshot@1 demo/echo", "synced@3"}, ws.next(t, 2)); diff != "" {
		t.Errorf("start (-want +got):\n%s", diff)
	}
	echoReg.Labels["app"] = "other"
	if status, b, _ := call(t, env, nil, discoverytest.RegisterToken, "PUT", "/v1/registrations/"+echo.ID, echoReg); status != 200 {
		t.Fatalf("relabel: %d %s", status, b)
	}
	register(t, env, discoverytest.Registration("ml", "model", "west", "us", "m2")) // not selected
	// Bookmarks may come at any time; the last one carries revision 5, a
	// change this watch did not get.
	got := ws.next(t, 1)
	for got[len(got)-1] != "bookmark@5" {
		got = append(got, ws.next(t, 1)...)
	}
	var changes []string
	for _, e := range got {
		if !strings.HasPrefix(e, "bookmark@") {
			changes = append(changes, e)
		}
	}
	if diff := cmp.Diff([]string{"delete@4 demo/echo"}, changes); diff != "" {
		t.Errorf("a pool that stops matching (-want +got):\n%s\nall: %v", diff, got)
	}
}

// A watch opened while the source is not synced waits for it: a snapshot
// taken then would end with a synced mark on partial knowledge.
func TestWatchWaitsForSync(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{Grace: time.Minute})
	ws := openWatch(t, env, "") // the answer's headers arrived
	register(t, env, discoverytest.Registration("demo", "echo", "east", "eu", "e1"))
	if diff := cmp.Diff([]string{"snapshot@1 demo/echo", "synced@1"}, ws.next(t, 2)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A client that does not read is cut off rather than holding up the
// store; what it got is whole, and it resumes from its last revision.
func TestSlowWatcherIsCutOff(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{Buffer: 4})
	// Changes go into the store directly: what is tested is the stream.
	big := discoveryv1.Pool{Namespace: "demo", Name: "big", Clusters: []discoveryv1.PoolCluster{{Cluster: "east"}}}
	for i := range 1000 {
		big.Clusters[0].Endpoints = append(big.Clusters[0].Endpoints, discoveryv1.Endpoint{
			InstanceID: fmt.Sprintf("instance-with-a-long-name-%04d", i), Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)},
			Ports: []discoveryv1.Port{{Name: "http", Port: 8080, Protocol: "TCP"}}, Ready: true, Serving: true,
		})
	}
	env.Store.Replace("test", big)

	req, _ := http.NewRequest("GET", env.URL+"/v1/watch", nil)
	req.Header.Set("Authorization", "Bearer "+discoverytest.ReadToken)
	resp, err := env.HTTPClient(t, nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Change the pool (about 150 kB an event) until the server's socket
	// buffers are full and the watcher's own buffer overflows.
	for i := 0; env.Store.Stats().CutOffs == 0; i++ {
		if i == 5000 {
			t.Fatal("5000 changes did not cut off a watcher that reads nothing")
		}
		big.Clusters[0].Endpoints[0].Ready = i%2 == 1
		env.Store.Replace("test", big)
	}
	// The stream ends after whole events.
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	var last discoveryv1.Event
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil {
			t.Fatalf("after %d events: %v", n, err)
		}
		if err := json.Unmarshal(line, &last); err != nil {
			t.Fatalf("event %d is not whole: %v", n, err)
		}
		n++
	}
	if (last.Type != discoveryv1.EventUpsert && last.Type != discoveryv1.EventSynced) || last.Revision >= env.Store.Revision() {
		t.Fatalf("the last event %s@%d; the store is at %d", last.Type, last.Revision, env.Store.Revision())
	}
	// Resuming from it brings the rest, without a snapshot.
	ws := openWatch(t, env, "?revision="+strconv.FormatInt(last.Revision, 10))
	rest := ws.next(t, int(env.Store.Revision()-last.Revision))
	if !strings.HasPrefix(rest[0], fmt.Sprintf("upsert@%d ", last.Revision+1-base)) {
		t.Errorf("resumed with %v", rest[:1])
	}
}
