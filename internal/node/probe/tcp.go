package probe

import (
	"context"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// tcpProbe runs a tcpSocket probe: a connection that opens passes.
func tcpProbe(ctx context.Context, s *corev1.TCPSocketAction, timeout time.Duration, podIP string, c *corev1.Container, t Target) (Result, string) {
	port, err := resolvePort(s.Port, c)
	if err != nil {
		return Unknown, err.Error()
	}
	host := s.Host
	if host == "" {
		host = podIP
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := t.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return Failure, err.Error()
	}
	// The probe asked only whether the port accepts; an error closing it
	// says nothing about the container.
	_ = conn.Close()
	return Success, ""
}
