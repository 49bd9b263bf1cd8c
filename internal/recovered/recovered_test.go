package recovered

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// panicky answers a health check, or panics when asked about "boom".
type panicky struct {
	healthpb.UnimplementedHealthServer
}

func (panicky) Check(_ context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if r.GetService() == "boom" {
		panic("injected")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (panicky) Watch(*healthpb.HealthCheckRequest, grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	panic("injected in a stream")
}

// A panicking unary or stream handler fails its call with Internal, is
// counted, and the server answers the next call.
func TestGRPCServerRecovers(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := grpc.NewServer(GRPCServerOptions("test", log)...)
	healthpb.RegisterHealthServer(s, panicky{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	before := testutil.ToFloat64(Total.WithLabelValues("test"))

	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{Service: "boom"})
	if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "injected") {
		t.Errorf("a panicking call: %v, want Internal without the panic's text", err)
	}
	stream, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Internal {
		t.Errorf("a panicking stream: %v, want Internal", err)
	}
	if got := testutil.ToFloat64(Total.WithLabelValues("test")) - before; got != 2 {
		t.Errorf("%v panics counted, want 2", got)
	}
	if r, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("the call after: %v %v", r, err)
	}
}

func TestDo(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	want := errors.New("plain")
	if err := Do("work", log, func() error { return want }); err != want {
		t.Errorf("an error is passed on: %v", err)
	}
	err := Do("work", log, func() error { panic("injected") })
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Errorf("a panic: %v", err)
	}
	reg := prometheus.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := Register(reg); err != nil {
		t.Errorf("registering twice: %v", err)
	}
}
