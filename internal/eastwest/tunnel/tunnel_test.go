package tunnel_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// fleet is a CA and the gateway certificates of its clusters.
type fleet struct {
	ca   *pki.KeyPair
	pool *x509.CertPool
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	return &fleet{ca: ca, pool: pool}
}

func (f *fleet) creds(t *testing.T, kp *pki.KeyPair, err error) tunnel.Credentials {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return tunnel.StaticCredentials{Cert: &c, Pool: f.pool}
}

// signed is a certificate of the fleet's CA with any organizations, for
// identities pki does not issue.
func (f *fleet) signed(t *testing.T, name string, orgs ...string) (*pki.KeyPair, error) {
	t.Helper()
	block, _ := pem.Decode(f.ca.KeyPEM)
	caKey, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(mustDecode(t, f.ca.CertPEM))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &pki.KeyPair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}, nil
}

func mustDecode(t *testing.T, p []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(p)
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

func (f *fleet) gateway(t *testing.T, cluster string) tunnel.Credentials {
	kp, err := f.ca.EastWestCert(cluster)
	return f.creds(t, kp, err)
}

func (f *fleet) dialer(t *testing.T, cluster string) *tunnel.Dialer {
	d := &tunnel.Dialer{Credentials: f.gateway(t, cluster)}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// serve runs s as cluster's gateway on loopback and returns its address
// and the connections it accepted.
func (f *fleet) serve(t *testing.T, cluster string, s *tunnel.Server) (string, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, cl, tunnel.ServerConfig(f.gateway(t, cluster))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), cl
}

// backend serves each connection on loopback with handle, which closes
// it, and returns its address.
func backend(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

// echoBackend answers each connection with what it reads, and closes its
// side after the caller closed theirs.
func echoBackend(t *testing.T) string {
	return backend(t, func(c net.Conn) {
		defer c.Close()
		_, _ = io.Copy(c, c)
	})
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// pingPong sends "ping" on an echoed stream, ends what it sends, and
// checks that "ping" comes back before the end.
func pingPong(t *testing.T, s *tunnel.Stream, what string) {
	t.Helper()
	if _, err := io.WriteString(s, "ping"); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	_ = s.CloseWrite()
	if got, err := io.ReadAll(s); err != nil || string(got) != "ping" {
		t.Errorf("%s: %q, %v; want ping echoed", what, got, err)
	}
}

var echoTarget = tunnel.Target{Namespace: "demo", Name: "echo", Port: 80}

// scoped authorizes demo/echo:80 for west only, to the endpoints given.
func scoped(endpoints ...string) func(string, tunnel.Target) ([]string, *tunnel.Refusal) {
	return func(caller string, t tunnel.Target) ([]string, *tunnel.Refusal) {
		if t != echoTarget {
			return nil, &tunnel.Refusal{Status: http.StatusNotFound, Reason: tunnel.ReasonNotExported, Message: t.String() + " is not exported by east"}
		}
		if caller != "west" {
			return nil, &tunnel.Refusal{Status: http.StatusForbidden, Reason: tunnel.ReasonOutOfScope, Message: "cluster " + caller + " is outside " + t.String() + "'s export-to scope"}
		}
		return endpoints, nil
	}
}

// A stream carries bytes both ways, passes the caller's end of stream on
// as a half-close, and is counted for its peer and service.
func TestStreamCarriesBothWays(t *testing.T) {
	f := newFleet(t)
	reg := prometheus.NewRegistry()
	addr, _ := f.serve(t, "east", &tunnel.Server{Authorize: scoped(echoBackend(t)), Metrics: tunnel.NewMetrics(reg)})
	s, err := f.dialer(t, "west").Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: addr}, echoTarget)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := strings.Repeat("hello through the tunnel ", 10000)
	go func() {
		_, _ = io.WriteString(s, want)
		_ = s.CloseWrite()
	}()
	got, err := io.ReadAll(s)
	if err != nil || string(got) != want {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(want))
	}
	testkit.Eventually(t, 5*time.Second, "the stream is counted", func(context.Context) error {
		n, err := testutil.GatherAndCount(reg, "fleetnet_eastwest_streams_total")
		if err != nil || n != 1 {
			return fmt.Errorf("%d series, %v", n, err)
		}
		return testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP fleetnet_eastwest_stream_bytes_total Bytes carried, by calling cluster, service and direction (in: from the caller).
# TYPE fleetnet_eastwest_stream_bytes_total counter
fleetnet_eastwest_stream_bytes_total{direction="in",peer="west",service="demo/echo"} %d
fleetnet_eastwest_stream_bytes_total{direction="out",peer="west",service="demo/echo"} %d
# HELP fleetnet_eastwest_streams_active Streams being carried, by calling cluster.
# TYPE fleetnet_eastwest_streams_active gauge
fleetnet_eastwest_streams_active{peer="west"} 0
`, len(want), len(want))), "fleetnet_eastwest_stream_bytes_total", "fleetnet_eastwest_streams_active")
	})
}

// Every stream the gateway must not carry is refused at once, with its
// reason, and counted; the gateway dials nothing for it.
func TestRefusals(t *testing.T) {
	f := newFleet(t)
	reg := prometheus.NewRegistry()
	var dialled atomic.Int64
	srv := &tunnel.Server{Authorize: scoped(echoBackend(t)), Metrics: tunnel.NewMetrics(reg),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dialled.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
	addr, _ := f.serve(t, "east", srv)
	edgeKP, err := f.ca.EdgeCert("edge-0")
	edgeCert := f.creds(t, edgeKP, err)
	noNameKP, err := f.ca.EastWestCert("")
	noName := f.creds(t, noNameKP, err)
	bothKP, err := f.signed(t, "west", keys.OrganizationClusters, keys.OrganizationAdmins)
	both := f.creds(t, bothKP, err)

	// raw sends one request as the client certificate's holder, with any
	// method and :authority.
	raw := func(cert tunnel.Credentials, method, authority string) (int, string) {
		t.Helper()
		protocols := new(http.Protocols)
		protocols.SetHTTP2(true)
		tr := &http.Transport{TLSClientConfig: tunnel.ClientConfig(cert, "east"), Protocols: protocols}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cc, err := tr.NewClientConn(ctx, "https", addr)
		if err != nil {
			t.Fatalf("connecting as %s: %v", method, err)
		}
		defer cc.Close()
		pr, pw := io.Pipe()
		defer pw.Close()
		req, _ := http.NewRequest(method, "https://"+addr+"/", pr)
		req.Host = authority
		if method != http.MethodConnect {
			req.Body = nil
		}
		resp, err := cc.RoundTrip(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("%s %s: %v", method, authority, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(body)
	}
	west, hub := f.gateway(t, "west"), f.gateway(t, "hub")
	for _, tc := range []struct {
		name      string
		cert      tunnel.Credentials
		method    string
		authority string
		status    int
		reason    string
		message   string
	}{
		{"a cluster outside the export's scope", hub, http.MethodConnect, echoTarget.Authority(), 403, tunnel.ReasonOutOfScope, "cluster hub is outside demo/echo:80's export-to scope"},
		{"a service not exported", west, http.MethodConnect, "db.demo.svc.clusterset.local:5432", 404, tunnel.ReasonNotExported, "demo/db:5432 is not exported"},
		{"an address, not a service", west, http.MethodConnect, "169.254.169.254:80", 400, tunnel.ReasonBadTarget, "not in svc.clusterset.local"},
		{"a loopback name", west, http.MethodConnect, "localhost:9090", 400, tunnel.ReasonBadTarget, "not in svc.clusterset.local"},
		{"not CONNECT", west, http.MethodGet, echoTarget.Authority(), 405, tunnel.ReasonNotConnect, "only CONNECT"},
		{"an edge's certificate of the fleet CA", edgeCert, http.MethodConnect, echoTarget.Authority(), 403, tunnel.ReasonNotCluster, "not of organization fleetnet:clusters"},
		{"a cluster certificate with no name", noName, http.MethodConnect, echoTarget.Authority(), 403, tunnel.ReasonNotCluster, "names no cluster"},
		{"a certificate of a cluster and an administrator", both, http.MethodConnect, echoTarget.Authority(), 403, tunnel.ReasonNotCluster, "a cluster's is of the first alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := refusals(t, reg, tc.reason)
			status, body := raw(tc.cert, tc.method, tc.authority)
			if status != tc.status || !strings.Contains(body, tc.message) {
				t.Errorf("%d %q, want %d with %q", status, body, tc.status, tc.message)
			}
			if after := refusals(t, reg, tc.reason); after != before+1 {
				t.Errorf("refusals with reason %s: %v → %v", tc.reason, before, after)
			}
		})
	}
	if n := dialled.Load(); n != 0 {
		t.Errorf("the gateway dialled %d times for refused streams", n)
	}

	// Through the dialer, a refusal is an error at once, not a hang.
	start := time.Now()
	_, err = f.dialer(t, "hub").Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: addr}, echoTarget)
	var refused *tunnel.RefusedError
	if !errors.As(err, &refused) || refused.Status != 403 || time.Since(start) > 2*time.Second {
		t.Errorf("Dial as hub: %v after %v, want a 403 RefusedError at once", err, time.Since(start))
	}
}

// refusals is the refusals counter of one reason.
func refusals(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fleetnet_eastwest_streams_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The dialer checks the peer's identity exactly: a gateway reached for
// one cluster that presents another's certificate, or one of another CA,
// gets no stream.
func TestPeerIdentityIsCheckedExactly(t *testing.T) {
	f := newFleet(t)
	addr, _ := f.serve(t, "east", &tunnel.Server{Authorize: scoped(echoBackend(t))})
	_, err := f.dialer(t, "west").Dial(context.Background(), tunnel.Peer{Cluster: "south", Address: addr}, echoTarget)
	if err == nil || !strings.Contains(err.Error(), `the gateway reached for cluster "south" presented cluster "east"'s certificate`) {
		t.Errorf("dialling east's gateway as south's: %v", err)
	}
	other := newFleet(t)
	kp, err := other.ca.EastWestCert("west")
	d := &tunnel.Dialer{Credentials: f.creds(t, kp, err)} // another CA's certificate, this fleet's roots
	t.Cleanup(func() { _ = d.Close() })
	if _, err := d.Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: addr}, echoTarget); err == nil {
		t.Error("a client of another CA got a stream")
	}
}

// A caller that stops reading holds the endpoint's connection no longer
// than the send timeout, and the gateway serves other streams meanwhile.
func TestCallerThatStopsReading(t *testing.T) {
	f := newFleet(t)
	released := make(chan time.Duration, 1)
	flood := backend(t, func(c net.Conn) { // sends for ever, and notes when it cannot
		defer c.Close()
		start, buf := time.Now(), make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				released <- time.Since(start)
				return
			}
		}
	})
	echo := echoBackend(t)
	srv := &tunnel.Server{SendTimeout: 300 * time.Millisecond, Authorize: func(caller string, tg tunnel.Target) ([]string, *tunnel.Refusal) {
		if tg.Name == "flood" {
			return []string{flood}, nil
		}
		return []string{echo}, nil
	}}
	addr, _ := f.serve(t, "east", srv)
	d := f.dialer(t, "west")
	peer := tunnel.Peer{Cluster: "east", Address: addr}
	s, err := d.Dial(context.Background(), peer, tunnel.Target{Namespace: "demo", Name: "flood", Port: 80})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // never read
	select {
	case d := <-released:
		t.Logf("the endpoint's connection was released %v after the stream started", d.Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint's connection is still held 10 s after the caller stopped reading")
	}
	// Another stream on the same connection still works.
	e, err := d.Dial(context.Background(), peer, echoTarget)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pingPong(t, e, "another stream")
}

// An endpoint that cannot be dialled fails the stream at once (502), and
// the next endpoint is tried first.
func TestUnreachableEndpoints(t *testing.T) {
	f := newFleet(t)
	dead := deadAddr(t)
	for _, tc := range []struct {
		name      string
		endpoints []string
		wantErr   string
	}{
		{"every endpoint dead", []string{dead}, "502"},
		{"the first dead", []string{dead, echoBackend(t)}, ""},
		{"none ready", nil, "503 demo/echo:80 has no ready endpoint in this cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := f.serve(t, "east", &tunnel.Server{Authorize: scoped(tc.endpoints...)})
			s, err := f.dialer(t, "west").Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: addr}, echoTarget)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Dial: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		})
	}
}

// Streams to one peer share connections: as many on one as the peer
// allows at once, then another.
func TestStreamsShareConnections(t *testing.T) {
	f := newFleet(t)
	addr, accepted := f.serve(t, "east", &tunnel.Server{Authorize: scoped(echoBackend(t))})
	d := f.dialer(t, "west")
	n := tunnel.MaxStreamsPerConnection + 10
	streams := make([]*tunnel.Stream, n)
	// One first, so that the peer's SETTINGS (its stream limit) are known:
	// until they come, a client assumes 100 (RFC 9113 §6.5.2 leaves it
	// open; x/net's default).
	first, err := d.Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: addr}, echoTarget)
	if err != nil {
		t.Fatal(err)
	}
	streams[0] = first
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: addr}, echoTarget)
			if err != nil {
				errs <- err
				return
			}
			streams[i] = s
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range streams {
		s.Close()
	}
	if got := accepted.n.Load(); got != 2 {
		t.Errorf("%d streams used %d connections, want 2 (%d streams each)", n, got, tunnel.MaxStreamsPerConnection)
	}
}

// One cluster holds at most MaxStreamsPerPeer streams at once: past it
// its streams are refused (429) while another cluster's are carried, and
// a stream that ends frees its place.
func TestStreamsPerPeerAreCapped(t *testing.T) {
	f := newFleet(t)
	reg := prometheus.NewRegistry()
	be := echoBackend(t)
	addr, _ := f.serve(t, "east", &tunnel.Server{MaxStreamsPerPeer: 3, Metrics: tunnel.NewMetrics(reg),
		Authorize: func(string, tunnel.Target) ([]string, *tunnel.Refusal) { return []string{be}, nil }})
	peer := tunnel.Peer{Cluster: "east", Address: addr}
	west := f.dialer(t, "west")
	var held []*tunnel.Stream
	for range 3 {
		s, err := west.Dial(context.Background(), peer, echoTarget)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	var refused *tunnel.RefusedError
	if _, err := west.Dial(context.Background(), peer, echoTarget); !errors.As(err, &refused) || refused.Status != http.StatusTooManyRequests {
		t.Fatalf("west's fourth stream: %v, want 429", err)
	}
	if got := refusals(t, reg, tunnel.ReasonPeerLimit); got != 1 {
		t.Errorf("refusals for peer_limit: %v", got)
	}
	if s, err := f.dialer(t, "hub").Dial(context.Background(), peer, echoTarget); err != nil {
		t.Errorf("hub's stream while west holds its maximum: %v", err)
	} else {
		s.Close()
	}
	held[0].Close()
	testkit.Eventually(t, 5*time.Second, "west's closed stream frees a place", func(context.Context) error {
		s, err := west.Dial(context.Background(), peer, echoTarget)
		if err != nil {
			return err
		}
		return s.Close()
	})
	for _, s := range held[1:] {
		s.Close()
	}
}

// A stream ends when its endpoint closes, though the caller keeps its
// side open: the caller reads the end at once and the stream's place is
// freed.
func TestStreamEndsWhenTheEndpointCloses(t *testing.T) {
	f := newFleet(t)
	bye := backend(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "bye")
		c.Close()
	})
	reg := prometheus.NewRegistry()
	addr, _ := f.serve(t, "east", &tunnel.Server{Metrics: tunnel.NewMetrics(reg), Authorize: scoped(bye)})
	s, err := f.dialer(t, "west").Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: addr}, echoTarget)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(s); got <- string(b) }() // never half-closed
	select {
	case b := <-got:
		if b != "bye" {
			t.Errorf("read %q, want bye", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end 5 s after its endpoint closed")
	}
	testkit.Eventually(t, 5*time.Second, "the stream's place is freed", func(context.Context) error {
		return testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fleetnet_eastwest_streams_active Streams being carried, by calling cluster.
# TYPE fleetnet_eastwest_streams_active gauge
fleetnet_eastwest_streams_active{peer="west"} 0
`), "fleetnet_eastwest_streams_active")
	})
}

// A stream idle both ways for the idle timeout ends; one that moves bytes
// one way only is not idle, and what the caller sends after a long quiet
// still arrives.
func TestIdleStreams(t *testing.T) {
	f := newFleet(t)
	ticker := backend(t, func(c net.Conn) {
		defer c.Close()
		var first [1]byte
		if _, err := io.ReadFull(c, first[:]); err != nil {
			return
		}
		if first[0] == 'q' { // quiet: wait for the stream to end
			_, _ = io.Copy(io.Discard, c)
			return
		}
		for range 10 { // ticks, 100 ms apart: 1 s with the caller silent
			time.Sleep(100 * time.Millisecond)
			if _, err := io.WriteString(c, "."); err != nil {
				return
			}
		}
		_, _ = io.Copy(c, c) // then echo
	})
	addr, _ := f.serve(t, "east", &tunnel.Server{IdleTimeout: 300 * time.Millisecond, Authorize: scoped(ticker)})
	d := f.dialer(t, "west")
	peer := tunnel.Peer{Cluster: "east", Address: addr}

	quiet, err := d.Dial(context.Background(), peer, echoTarget)
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	start := time.Now()
	_, _ = io.WriteString(quiet, "q")
	if _, err := io.ReadAll(quiet); err != nil && !errors.Is(err, io.EOF) {
		t.Logf("the idle stream ended with %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("an idle stream ended after %v, want about 300ms", took)
	}

	ticking, err := d.Dial(context.Background(), peer, echoTarget)
	if err != nil {
		t.Fatal(err)
	}
	defer ticking.Close()
	_, _ = io.WriteString(ticking, "t")
	ticks := make([]byte, 10)
	if _, err := io.ReadFull(ticking, ticks); err != nil {
		t.Fatalf("a stream that moves bytes one way for 1 s: %v after %q", err, ticks)
	}
	pingPong(t, ticking, "the caller's bytes after 1 s of its silence")
}

// A refusal or a slow answer is not a failure to reach the gateway; a
// gateway that cannot be reached is (the edge ejects it for that alone).
func TestConnectErrors(t *testing.T) {
	f := newFleet(t)
	d := f.dialer(t, "west")
	var connErr *tunnel.ConnectError
	if _, err := d.Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: deadAddr(t)}, echoTarget); !errors.As(err, &connErr) {
		t.Errorf("a gateway that is not there: %v, want a ConnectError", err)
	}
	addr, _ := f.serve(t, "east", &tunnel.Server{Authorize: scoped()})
	if _, err := d.Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: addr}, tunnel.Target{Namespace: "demo", Name: "db", Port: 1}); err == nil || errors.As(err, &connErr) {
		t.Errorf("a refusal: %v, want an error that is not a ConnectError", err)
	}
}

// A dialer counts its failed connections by peer and reason (a gateway not
// there, one whose certificate names another cluster), and reports the
// connections it holds.
func TestDialerMetrics(t *testing.T) {
	f := newFleet(t)
	reg := prometheus.NewRegistry()
	d := f.dialer(t, "west")
	d.Metrics = tunnel.NewMetrics(reg)
	reg.MustRegister(d)
	addr, _ := f.serve(t, "east", &tunnel.Server{Authorize: scoped(echoBackend(t))})
	_, _ = d.Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: deadAddr(t)}, echoTarget)
	_, _ = d.Dial(context.Background(), tunnel.Peer{Cluster: "south", Address: addr}, echoTarget)
	s, err := d.Dial(context.Background(), tunnel.Peer{Cluster: "east", Address: addr}, echoTarget)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := []string{}
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for k, want := range map[string]float64{
		"fleetnet_eastwest_tunnel_dial_errors_total{peer=east,reason=connect}":        1,
		"fleetnet_eastwest_tunnel_connections{peer=east}":                             1,
		"fleetnet_eastwest_tunnel_dial_errors_total{peer=south,reason=wrong_cluster}": 1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], want, got)
		}
	}
}
