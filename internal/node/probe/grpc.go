package probe

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
)

// grpcProbe runs a grpc probe: the grpc.health.v1 Check of the probe's
// service at the pod IP answers SERVING. The connection is plaintext; the
// alpha TLS mode (feature gate GRPCContainerProbeTLS, off by default) is not
// supported.
func grpcProbe(ctx context.Context, g *corev1.GRPCAction, timeout time.Duration, podIP string, t Target) (Result, string) {
	addr := net.JoinHostPort(podIP, strconv.Itoa(int(g.Port)))
	// passthrough hands the address to the dialer as it is, so nothing is
	// resolved outside the pod's network namespace.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(userAgent),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return t.DialContext(ctx, "tcp", addr)
		}),
	)
	if err != nil {
		return Unknown, fmt.Sprintf("error: creating a client for %q: %v", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var service string
	if g.Service != nil {
		service = *g.Service
	}
	// Without WaitForReady the call fails at once when the connection
	// cannot be made, instead of waiting out the timeout as the kubelet's
	// blocking dial does; the message still says the connection failed.
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.Unavailable:
			return Failure, fmt.Sprintf("error: failed to connect service at %q: %v", addr, err)
		case codes.Unimplemented:
			return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message())
		case codes.DeadlineExceeded:
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)
		default:
			return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err)
		}
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String())
	}
	return Success, ""
}
