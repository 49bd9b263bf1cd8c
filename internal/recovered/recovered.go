// Package recovered keeps a panic in one request or one piece of work from
// taking the whole process down: the panic is logged with its stack,
// counted in fleetnet_panics_recovered_total{where}, and becomes an error
// for that request or work item alone.
package recovered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Total counts recovered panics by where they happened.
var Total = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fleetnet_panics_recovered_total",
	Help: "Panics recovered instead of ending the process, by where they happened (a gRPC server, a provider's work).",
}, []string{"where"})

// Register adds Total to reg; a registry that has it already is fine.
func Register(reg prometheus.Registerer) error {
	if err := reg.Register(Total); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return fmt.Errorf("registering %s: %w", "fleetnet_panics_recovered_total", err)
		}
	}
	return nil
}

// GRPCServerOptions recover panics in the handlers of a gRPC server named
// where: the call fails with Internal (the caller sees no stack), the
// process keeps serving. Put them first, so that they also cover the
// other interceptors.
func GRPCServerOptions(where string, log *slog.Logger) []grpc.ServerOption {
	handler := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		method, _ := grpc.Method(ctx)
		Total.WithLabelValues(where).Inc()
		log.Error("panic in a gRPC handler, recovered", "server", where, "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Errorf(codes.Internal, "internal error in %s (the server logged it)", method)
	})
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(recovery.UnaryServerInterceptor(handler)),
		grpc.ChainStreamInterceptor(recovery.StreamServerInterceptor(handler)),
	}
}

// Do runs f and turns a panic in it into an error (logged with its stack
// and counted under where), so that a loop or queue worker goes on with
// its next item and reports this one's failure like any other.
func Do(where string, log *slog.Logger, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			Total.WithLabelValues(where).Inc()
			log.Error("panic recovered", "where", where, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("internal error (a panic, recovered): %v", p)
		}
	}()
	return f()
}
