package proxy

import (
	"slices"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// policy is a backend's edgev1.BackendPolicy compiled for serving: every
// field set, durations as durations.
type policy struct {
	// check is the active health check, with every field set; with the
	// endpoint it names the unit whose health the backend's picks consult.
	check          edgev1.HealthCheck
	consecutive5xx int32
	ejection       time.Duration
	attempts       int
	codes          []int32
	connect        time.Duration
	backendRequest time.Duration
	localFirst     bool
	failover       []edgev1.FailoverStep
}

// defaultConnect bounds a dial that no backend's policy bounds (none
// should: every request is routed to a backend before it is forwarded).
var defaultConnect = millis(edgev1.DefaultBackendPolicy().ConnectTimeoutMillis)

// compilePolicy fills in a backend's policy. A zero policy, from a
// controller older than the field, is edgev1.DefaultBackendPolicy. A zero
// field of a partly filled one takes the default's value, except where
// zero means something: Consecutive5xx (never eject), Retry.Attempts (no
// retry) and BackendRequestMillis (no timeout). A health check type or a
// locality this edge does not know (from a newer controller) is TCP or
// Weighted: refusing the whole model over one backend's policy would stop
// every Gateway's updates.
func compilePolicy(p edgev1.BackendPolicy) policy {
	def := edgev1.DefaultBackendPolicy()
	if isZero(p) {
		p = def
	}
	hc := p.HealthCheck
	switch hc.Type {
	case edgev1.HealthCheckHTTP:
		if hc.Path == "" {
			hc.Path = "/"
		}
	default:
		// A TCP check has no path or host; clearing them keeps two
		// backends with the same TCP check on one checked unit.
		hc = edgev1.HealthCheck{Type: edgev1.HealthCheckTCP, IntervalMillis: hc.IntervalMillis, TimeoutMillis: hc.TimeoutMillis,
			HealthyThreshold: hc.HealthyThreshold, UnhealthyThreshold: hc.UnhealthyThreshold}
	}
	hc.IntervalMillis = orDefault(hc.IntervalMillis, def.HealthCheck.IntervalMillis)
	hc.TimeoutMillis = orDefault(hc.TimeoutMillis, def.HealthCheck.TimeoutMillis)
	hc.HealthyThreshold = orDefault(hc.HealthyThreshold, def.HealthCheck.HealthyThreshold)
	hc.UnhealthyThreshold = orDefault(hc.UnhealthyThreshold, def.HealthCheck.UnhealthyThreshold)
	return policy{
		check:          hc,
		consecutive5xx: max(p.Passive.Consecutive5xx, 0),
		ejection:       millis(orDefault(p.Passive.EjectionMillis, def.Passive.EjectionMillis)),
		attempts:       int(max(p.Retry.Attempts, 0)),
		codes:          p.Retry.Codes,
		connect:        millis(orDefault(p.ConnectTimeoutMillis, def.ConnectTimeoutMillis)),
		backendRequest: millis(max(p.BackendRequestMillis, 0)),
		localFirst:     p.Locality == edgev1.LocalityLocalFirst,
		failover:       p.Failover,
	}
}

func isZero(p edgev1.BackendPolicy) bool {
	return p.Source == "" && p.HealthCheck == (edgev1.HealthCheck{}) && p.Passive == (edgev1.PassiveHealthCheck{}) &&
		p.Retry.Attempts == 0 && len(p.Retry.Codes) == 0 && p.ConnectTimeoutMillis == 0 && p.BackendRequestMillis == 0 && p.Locality == ""
}

// orDefault is v, or def when v is not positive.
func orDefault[T int32 | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// retriesOn reports whether an answer with this status is tried again.
func (p *policy) retriesOn(status int) bool {
	return len(p.codes) > 0 && slices.Contains(p.codes, int32(status))
}
