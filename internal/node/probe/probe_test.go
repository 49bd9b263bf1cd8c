package probe

import (
	"context"
	"errors"
	"fmt"
	"github.com/fleetnet/fleetnet/internal/node/expansion"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetnet/fleetnet/internal/testkit"
)

// hostTarget is a Target on the test's own network: it dials the host
// network, recording what it dialed, and runs commands with exec.
type hostTarget struct {
	exec func(ctx context.Context, cmd []string) (int, []byte, error)

	mu     sync.Mutex
	dialed []string
}

var _ Target = (*hostTarget)(nil)

func (h *hostTarget) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	h.mu.Lock()
	h.dialed = append(h.dialed, address)
	h.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

func (h *hostTarget) Exec(ctx context.Context, cmd []string) (int, []byte, error) {
	if h.exec == nil {
		return 0, nil, errors.New("no exec in this test")
	}
	return h.exec(ctx, cmd)
}

func (h *hostTarget) dials() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string{}, h.dialed...)
}

// probeCase is one row of the handler tables: an attempt of probe with
// timeout (5 s when zero) against container, and what it should give.
type probeCase struct {
	name      string
	probe     *corev1.Probe
	container *corev1.Container
	podIP     string // 127.0.0.1 when empty
	timeout   time.Duration
	exec      func(ctx context.Context, cmd []string) (int, []byte, error)

	want Result
	// msg is a part of the message; for a Success without it the message
	// must be empty.
	msg string
	// dialed, when set, is every address the attempt dialed.
	dialed []string
}

func runCases(t *testing.T, tests []probeCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := &hostTarget{exec: tt.exec}
			timeout, podIP := tt.timeout, tt.podIP
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			if podIP == "" {
				podIP = "127.0.0.1"
			}
			got, msg := attempt(context.Background(), tt.probe, timeout, podIP, tt.container, target)
			if got != tt.want {
				t.Errorf("result = %v (%q), want %v", got, msg, tt.want)
			}
			switch {
			case tt.msg == "" && tt.want == Success && msg != "":
				t.Errorf("message = %q, want none", msg)
			case !strings.Contains(msg, tt.msg):
				t.Errorf("message = %q, want it to contain %q", msg, tt.msg)
			}
			if tt.dialed != nil {
				if diff := cmp.Diff(tt.dialed, target.dials()); diff != "" {
					t.Errorf("dialed (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// httpApp is the application behind the HTTP probes; it remembers the last
// request it answered.
type httpApp struct {
	mu   sync.Mutex
	last *http.Request
}

func (a *httpApp) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "fine") })
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.WriteHeader(code)
		fmt.Fprintf(w, "answered %d", code)
	})
	mux.HandleFunc("/empty-500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	mux.HandleFunc("/big-500", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		fmt.Fprint(w, strings.Repeat("x", 20<<10))
	})
	mux.HandleFunc("/to-ok", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/to-500", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/status/500", http.StatusFound) })
	mux.HandleFunc("/to-other-host", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://elsewhere.invalid/ok")
		w.WriteHeader(http.StatusFound)
		fmt.Fprint(w, "moved")
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.last = r.Clone(context.Background())
		a.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

func (a *httpApp) lastRequest() *http.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

func serverPort(t *testing.T, s *httptest.Server) int {
	t.Helper()
	_, p, err := net.SplitHostPort(s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func httpGet(port intstr.IntOrString, path string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: port, Path: path}}}
}

func TestHTTPGet(t *testing.T) {
	app := &httpApp{}
	srv := httptest.NewServer(app.handler())
	t.Cleanup(srv.Close)
	tlsSrv := httptest.NewTLSServer(app.handler())
	t.Cleanup(tlsSrv.Close)
	port, tlsPort := serverPort(t, srv), serverPort(t, tlsSrv)
	closed := testkit.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	named := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	https := httpGet(intstr.FromInt(tlsPort), "/ok")
	https.HTTPGet.Scheme = corev1.URISchemeHTTPS

	runCases(t, []probeCase{
		{name: "200 passes, dialing the pod IP", probe: httpGet(intstr.FromInt(port), "/ok"), want: Success, dialed: []string{addr}},
		{name: "399 passes", probe: httpGet(intstr.FromInt(port), "/status/204"), want: Success},
		{name: "named port", probe: httpGet(intstr.FromString("http"), "/ok"), container: named, want: Success},
		{name: "unknown port name cannot run", probe: httpGet(intstr.FromString("metrics"), "/ok"), container: named,
			want: Unknown, msg: `port "metrics" not found`, dialed: []string{}},
		{name: "port out of range cannot run", probe: httpGet(intstr.FromInt(70000), "/ok"), want: Unknown, msg: "invalid port number: 70000"},
		{name: "500 fails with the body's start", probe: httpGet(intstr.FromInt(port), "/status/500"),
			want: Failure, msg: `HTTP probe failed with statuscode: 500, response body: "answered 500"`},
		{name: "404 fails", probe: httpGet(intstr.FromInt(port), "/status/404"), want: Failure, msg: "statuscode: 404"},
		{name: "an empty body is left out", probe: httpGet(intstr.FromInt(port), "/empty-500"), want: Failure, msg: "statuscode: 500"},
		{name: "a long body is cut", probe: httpGet(intstr.FromInt(port), "/big-500"), want: Failure,
			msg: `response body: "` + strings.Repeat("x", bodyExcerpt) + `"…`},
		{name: "redirect to the same host is followed", probe: httpGet(intstr.FromInt(port), "/to-ok"), want: Success, dialed: []string{addr, addr}},
		{name: "followed redirect to a failure fails", probe: httpGet(intstr.FromInt(port), "/to-500"), want: Failure, msg: "statuscode: 500"},
		{name: "redirect to another host passes with a warning, not followed", probe: httpGet(intstr.FromInt(port), "/to-other-host"),
			want: Success, msg: `Probe terminated redirects, response body: "moved"`, dialed: []string{addr}},
		{name: "a redirect loop fails", probe: httpGet(intstr.FromInt(port), "/loop"), want: Failure, msg: "stopped after 10 redirects"},
		{name: "closed port fails", probe: httpGet(intstr.FromInt(closed), "/ok"), want: Failure, msg: "connection refused"},
		{name: "timeout fails", probe: httpGet(intstr.FromInt(port), "/slow"), timeout: 50 * time.Millisecond, want: Failure, msg: "Client.Timeout"},
		{name: "HTTPS without certificate verification", probe: https, want: Success},
		{name: "HTTPS scheme against a plain server fails", probe: func() *corev1.Probe {
			p := httpGet(intstr.FromInt(port), "/ok")
			p.HTTPGet.Scheme = corev1.URISchemeHTTPS
			return p
		}(), want: Failure},
		{name: "host overrides the pod IP", probe: func() *corev1.Probe {
			p := httpGet(intstr.FromInt(port), "/ok")
			p.HTTPGet.Host = "127.0.0.1"
			return p
		}(), podIP: "192.0.2.1", want: Success, dialed: []string{addr}},
	})
}

func TestHTTPGetHeaders(t *testing.T) {
	app := &httpApp{}
	srv := httptest.NewServer(app.handler())
	t.Cleanup(srv.Close)
	port := serverPort(t, srv)
	probeWith := func(h ...corev1.HTTPHeader) *corev1.Probe {
		p := httpGet(intstr.FromInt(port), "/ok?x=1")
		p.HTTPGet.HTTPHeaders = h
		return p
	}
	tests := []struct {
		name   string
		probe  *corev1.Probe
		host   string
		header http.Header // compared for the keys it names; "" means absent
		uri    string
	}{
		{"kubelet defaults", probeWith(), "127.0.0.1:" + strconv.Itoa(port),
			http.Header{"User-Agent": {userAgent}, "Accept": {"*/*"}, "X-Custom": {""}}, "/ok?x=1"},
		{"Host, User-Agent and Accept set by the probe", probeWith(
			corev1.HTTPHeader{Name: "Host", Value: "app.example"},
			corev1.HTTPHeader{Name: "User-Agent", Value: "mine/1"},
			corev1.HTTPHeader{Name: "Accept", Value: "application/json"},
			corev1.HTTPHeader{Name: "X-Custom", Value: "a"},
			corev1.HTTPHeader{Name: "X-Custom", Value: "b"},
		), "app.example", http.Header{"User-Agent": {"mine/1"}, "Accept": {"application/json"}, "X-Custom": {"a", "b"}}, "/ok?x=1"},
		{"an empty Accept sends none", probeWith(corev1.HTTPHeader{Name: "Accept", Value: ""}), "127.0.0.1:" + strconv.Itoa(port),
			http.Header{"Accept": {""}}, "/ok?x=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ok, msg := Do(context.Background(), tt.probe, "127.0.0.1", nil, &hostTarget{}); !ok {
				t.Fatalf("probe failed: %s", msg)
			}
			req := app.lastRequest()
			if req.Host != tt.host {
				t.Errorf("Host = %q, want %q", req.Host, tt.host)
			}
			if req.RequestURI != tt.uri {
				t.Errorf("request URI = %q, want %q", req.RequestURI, tt.uri)
			}
			for k, want := range tt.header {
				got := req.Header.Values(k)
				if len(want) == 1 && want[0] == "" {
					want = nil
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("header %s (-want +got):\n%s", k, diff)
				}
			}
		})
	}
}

func TestUserAgentFollowsKubernetesRelease(t *testing.T) {
	if !regexp.MustCompile(`^kube-probe/1\.\d+$`).MatchString(userAgent) {
		t.Errorf("userAgent = %q, want kube-probe/1.<minor>", userAgent)
	}
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"v0.37.2", "1.37", true},
		{"v0.40.0-alpha.1", "1.40", true},
		{"v1.2.3", "", false},
		{"(devel)", "", false},
		{"v0.x.1", "", false},
	}
	for _, tt := range tests {
		got, ok := kubeVersionOf(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("kubeVersionOf(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func tcpSocket(host string, port intstr.IntOrString) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: host, Port: port}}}
}

func TestTCPSocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	addr := l.Addr().String()
	closed := testkit.FreePort(t)
	named := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "db", ContainerPort: int32(port)}}}

	runCases(t, []probeCase{
		{name: "open port passes, dialing the pod IP", probe: tcpSocket("", intstr.FromInt(port)), want: Success, dialed: []string{addr}},
		{name: "named port", probe: tcpSocket("", intstr.FromString("db")), container: named, want: Success, dialed: []string{addr}},
		{name: "host overrides the pod IP", probe: tcpSocket("127.0.0.1", intstr.FromInt(port)), podIP: "192.0.2.1", want: Success, dialed: []string{addr}},
		{name: "closed port fails", probe: tcpSocket("", intstr.FromInt(closed)), want: Failure, msg: "connection refused"},
		{name: "unknown port name cannot run", probe: tcpSocket("", intstr.FromString("web")), container: named,
			want: Unknown, msg: `port "web" not found`, dialed: []string{}},
		{name: "no container, named port", probe: tcpSocket("", intstr.FromString("db")), want: Unknown, msg: `port "db" not found`},
	})
}

func grpcProbeOf(port int, service *string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(port), Service: service}}}
}

// grpcServer serves on the loopback; with health, it answers
// grpc.health.v1 with SERVING for "" and "api" and NOT_SERVING for "db".
func grpcServer(t *testing.T, withHealth bool) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	if withHealth {
		hs := health.NewServer()
		hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus("api", healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
		healthpb.RegisterHealthServer(s, hs)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().(*net.TCPAddr).Port
}

func TestGRPC(t *testing.T) {
	port := grpcServer(t, true)
	bare := grpcServer(t, false)
	closed := testkit.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	svc := func(s string) *string { return &s }
	// silent accepts connections and never answers, so the RPC waits out
	// its deadline.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	runCases(t, []probeCase{
		{name: "SERVING passes through the Target's dialer", probe: grpcProbeOf(port, nil), want: Success, dialed: []string{addr}},
		{name: "named service SERVING", probe: grpcProbeOf(port, svc("api")), want: Success},
		{name: "NOT_SERVING fails", probe: grpcProbeOf(port, svc("db")), want: Failure, msg: `service unhealthy (responded with "NOT_SERVING")`},
		{name: "unknown service fails", probe: grpcProbeOf(port, svc("nope")), want: Failure, msg: "error: health rpc probe failed"},
		{name: "no health service fails", probe: grpcProbeOf(bare, nil), want: Failure,
			msg: "error: this server does not implement the grpc health protocol (grpc.health.v1.Health)"},
		{name: "closed port fails", probe: grpcProbeOf(closed, nil), want: Failure, msg: "error: failed to connect service at"},
		{name: "a server that does not answer times out", probe: grpcProbeOf(silent.Addr().(*net.TCPAddr).Port, nil),
			timeout: 50 * time.Millisecond, want: Failure, msg: "timeout: health rpc did not complete within 50ms"},
	})
}

func execProbeOf(cmd ...string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}}
}

// exits returns an exec that exits with code and prints out.
func exits(code int, out string) func(context.Context, []string) (int, []byte, error) {
	return func(context.Context, []string) (int, []byte, error) { return code, []byte(out), nil }
}

func TestExec(t *testing.T) {
	var ran []string
	runCases(t, []probeCase{
		{name: "exit 0 passes", probe: execProbeOf("check"), exec: exits(0, "all good"), want: Success},
		{name: "non-zero exit fails with the output", probe: execProbeOf("check"), exec: exits(1, "not ready yet\n"), want: Failure, msg: "not ready yet\n"},
		{name: "non-zero exit without output says the code", probe: execProbeOf("check", "-v"), exec: exits(3, ""),
			want: Failure, msg: `command "check -v" exited with code 3`},
		{name: "output is cut at 10 KiB", probe: execProbeOf("check"), exec: exits(1, strings.Repeat("y", 20<<10)),
			want: Failure, msg: strings.Repeat("y", maxOutput)},
		{name: "a command that cannot run", probe: execProbeOf("check"),
			exec: func(context.Context, []string) (int, []byte, error) { return -1, nil, errors.New("no such container") },
			want: Unknown, msg: `running "check": no such container`},
		{name: "timeout fails", probe: execProbeOf("sleep", "10"), timeout: 20 * time.Millisecond,
			exec: func(ctx context.Context, _ []string) (int, []byte, error) { <-ctx.Done(); return -1, nil, ctx.Err() },
			want: Failure, msg: `command timed out: "sleep 10" timed out after 20ms`},
		{name: "the container's literal env is expanded", probe: execProbeOf("check", "$(PORT)", "$(SECRET)", "$(NONE)", "$$(PORT)"),
			container: &corev1.Container{Env: []corev1.EnvVar{
				{Name: "PORT", Value: "8080"},
				{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
			}},
			exec: func(_ context.Context, cmd []string) (int, []byte, error) {
				ran = cmd
				return 0, nil, nil
			},
			want: Success},
	})
	if diff := cmp.Diff([]string{"check", "8080", "", "$(NONE)", "$(PORT)"}, ran); diff != "" {
		t.Errorf("command run (-want +got):\n%s", diff)
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two", "": "empty"}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"x$(A)y$(B)z", "x1ytwoz"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"$", "$"},
		{"a$", "a$"},
		{"$A", "$A"},
		{"$(A", "$(A"},
		{"$($(A)", "$($(A)"},
		{"$()", "empty"},
		{"100$", "100$"},
		{"$é", "$é"},
	}
	for _, tt := range tests {
		if got := expansion.Expand(tt.in, vars); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNoHandler(t *testing.T) {
	runCases(t, []probeCase{
		{name: "nil probe passes", probe: nil, want: Success},
		{name: "probe without a handler cannot run", probe: &corev1.Probe{}, want: Unknown, msg: "missing probe handler"},
	})
}

func TestDo(t *testing.T) {
	named := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		name   string
		probe  *corev1.Probe
		exec   func(context.Context, []string) (int, []byte, error)
		wantOK bool
		msg    string
	}{
		{"passes", execProbeOf("true"), exits(0, ""), true, ""},
		{"fails", execProbeOf("false"), exits(1, "nope"), false, "nope"},
		{"cannot run is not a pass", httpGet(intstr.FromString("admin"), "/"), nil, false, `port "admin" not found`},
		{"the default timeout of 1 s applies", execProbeOf("wait"), func(ctx context.Context, _ []string) (int, []byte, error) {
			dl, ok := ctx.Deadline()
			if !ok || time.Until(dl) > time.Second {
				return 1, []byte(fmt.Sprintf("deadline %v, %v", dl, ok)), nil
			}
			return 0, nil, nil
		}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, msg := Do(context.Background(), tt.probe, "127.0.0.1", named, &hostTarget{exec: tt.exec})
			if ok != tt.wantOK || msg != tt.msg {
				t.Errorf("Do = %v, %q; want %v, %q", ok, msg, tt.wantOK, tt.msg)
			}
		})
	}
}

func TestResolvePort(t *testing.T) {
	c := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "zero"}}}
	tests := []struct {
		name    string
		port    intstr.IntOrString
		want    int
		wantErr string
	}{
		{"number", intstr.FromInt(80), 80, ""},
		{"name", intstr.FromString("http"), 8080, ""},
		{"unknown name", intstr.FromString("grpc"), 0, `port "grpc" not found`},
		{"a number as a string is a name", intstr.FromString("8080"), 0, `port "8080" not found`},
		{"zero", intstr.FromInt(0), 0, "invalid port number: 0"},
		{"named port without a number", intstr.FromString("zero"), 0, "invalid port number: 0"},
		{"too large", intstr.FromInt(65536), 0, "invalid port number: 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolvePort(tt.port, c)
			var gotErr string
			if err != nil {
				gotErr = err.Error()
			}
			if got != tt.want || gotErr != tt.wantErr {
				t.Errorf("resolvePort = %d, %q; want %d, %q", got, gotErr, tt.want, tt.wantErr)
			}
		})
	}
}
