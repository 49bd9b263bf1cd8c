package model

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// assignAddresses gives every Gateway of the model an address of its own
// from in.AddressPool, when there is one: the edges bind each Gateway's
// listeners at its address, so Gateways may use the same port numbers, as
// Gateways of a cloud load balancer do. The Gateway's status is the
// memory: a Gateway keeps the pool address its status (or, when refused,
// its last accepted entry) already holds, older Gateways first, so that
// addresses survive restarts of the controller and never move between
// live Gateways; the others take the lowest free address. A Gateway that
// finds the pool exhausted is left out of the model, and its status says
// why. m.Gateways and statuses are both in b.gatewayOrder.
func (b *builder) assignAddresses(m *[]edgev1.Gateway, statuses []GatewayStatus) {
	pool := b.in.AddressPool
	if !pool.IsValid() {
		return
	}
	gws := *m
	order := make([]int, len(gws))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		gx, gy := b.gatewayOrder[x].gw, b.gatewayOrder[y].gw
		return cmp.Or(gx.CreationTimestamp.Time.Compare(gy.CreationTimestamp.Time), cmp.Compare(gx.Namespace, gy.Namespace), cmp.Compare(gx.Name, gy.Name))
	})
	taken := map[netip.Addr]bool{}
	claim := func(s string) (string, bool) {
		a, err := netip.ParseAddr(s)
		if err != nil || !pool.Contains(a) || taken[a] {
			return "", false
		}
		taken[a] = true
		return a.String(), true
	}
	// First what Gateways hold, so that a new Gateway never takes an
	// address an older one serves at.
	assigned := make([]string, len(gws))
	for _, i := range order {
		if a, ok := claim(gws[i].Address); ok {
			assigned[i] = a
			continue
		}
		for _, st := range b.gatewayOrder[i].gw.Status.Addresses {
			if a, ok := claim(st.Value); ok {
				assigned[i] = a
				break
			}
		}
	}
	next := pool.Masked().Addr().Next() // the network's own address is left out
	exhausted := map[int]bool{}
	for _, i := range order {
		if assigned[i] != "" {
			continue
		}
		for next.IsValid() && pool.Contains(next) && taken[next] {
			next = next.Next()
		}
		if !next.IsValid() || !pool.Contains(next) {
			exhausted[i] = true
			continue
		}
		taken[next] = true
		assigned[i] = next.String()
	}
	kept := gws[:0:0]
	for i := range gws {
		if exhausted[i] {
			statuses[i].AddressProblem = fmt.Sprintf("no free address in the Gateway address pool %s: %d Gateways hold all of them", pool, len(taken))
			continue
		}
		gws[i].Address = assigned[i]
		statuses[i].Addresses = []string{assigned[i]}
		kept = append(kept, gws[i])
	}
	*m = kept
}
