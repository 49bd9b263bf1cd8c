package dev

import (
	"errors"
	"fmt"
	"github.com/fleetnet/fleetnet/internal/podnet"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetnet/fleetnet/internal/netns"
)

// What a local fleet with nodes makes on the machine outside its folder:
// network namespaces named fleetnet-* (pods' fleetnet-<hash>, nodes'
// fleetnet-node-<cluster>), the processes inside them, the host ends of
// their veths (fnh*, fnn*), files under /etc/netns, and the bridge.
//
// A namespace lives on after `ip netns del` while a process is inside it,
// and a veth lives as long as its namespace: a kube-proxy or a pod's
// process that outlived its fleet keeps programming a node that nobody
// sees. So `dev down` kills what is inside a namespace before deleting it
// and returns only when nothing of its fleet is left, and `dev up` clears
// what an earlier fleet left (it no longer runs: no fleet claims it) and
// refuses to start, naming it, on what it cannot clear.

// Host-side veth prefixes: pods' (podNetNames) and nodes' (nodeVeth).
const (
	podVethPrefix  = "fnh"
	nodeVethPrefix = "fnn"
	netnsPrefix    = "fleetnet-"
)

// leftover is one thing of a local fleet that no running fleet claims.
type leftover struct {
	kind string // "network namespace", "veth", "bridge"
	name string
	// pids are the processes inside a namespace.
	pids []int
}

func (l leftover) String() string {
	s := l.kind + " " + l.name
	if len(l.pids) > 0 {
		s += fmt.Sprintf(" (processes %v inside)", l.pids)
	}
	return s
}

// claims are the namespace and veth names that fleets hold.
type claims map[string]bool

// claim adds the names of a fleet's pods and nodes.
func (c claims) claim(s *State) {
	for _, p := range s.Pods {
		c[p.NetNS], c[p.HostVeth] = true, true
	}
	if s.Nodes {
		for _, cl := range s.Clusters {
			c[cl.NodeNetNS()], c[cl.nodeVeth()] = true, true
			if ns := cl.NetworkNS(); ns != "" {
				c[ns], c[transitVeth(cl.Network)] = true, true
			}
		}
	}
}

// runningClaims are the names held by the fleets with nodes that run
// (recorded in nodeOwners), except the fleet in self.
func runningClaims(self string) claims {
	c := claims{}
	entries, _ := os.ReadDir(nodeOwners)
	seen := map[string]bool{self: true}
	for _, e := range entries {
		owner := nodeOwner(e.Name())
		if owner == "" || seen[owner] {
			continue
		}
		seen[owner] = true
		if !fleetRuns(owner) {
			continue
		}
		if s, err := Load(owner); err == nil {
			c.claim(s)
		} else {
			// A running fleet whose state cannot be read: keep its node
			// namespace at least; its pods' names are unknown, so nothing
			// unclaimed may be swept.
			c[e.Name()] = true
			c[""] = true
		}
	}
	return c
}

// findLeftovers lists the fleet things on the machine that keep does not
// claim. The bridge is a leftover only when no fleet claims anything.
func findLeftovers(keep claims) ([]leftover, error) {
	if keep[""] {
		return nil, nil // a running fleet's claims are unknown
	}
	var out []leftover
	entries, err := os.ReadDir(netns.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var nsNames []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), netnsPrefix) && !keep[e.Name()] {
			nsNames = append(nsNames, e.Name())
		}
	}
	if len(nsNames) > 0 {
		inside, err := processesIn(nsNames)
		if err != nil {
			return nil, err
		}
		for _, n := range nsNames {
			out = append(out, leftover{kind: "network namespace", name: n, pids: inside[n]})
		}
	}
	links, err := hostLinks()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if (strings.HasPrefix(l, podVethPrefix) || strings.HasPrefix(l, nodeVethPrefix)) && !keep[l] {
			out = append(out, leftover{kind: "veth", name: l})
		}
	}
	if len(keep) == 0 && slices.Contains(links, BridgeName) {
		out = append(out, leftover{kind: "bridge", name: BridgeName})
	}
	return out, nil
}

// clearLeftovers kills the processes inside leftover namespaces and
// deletes the namespaces, veths and bridge; it returns what it could not
// clear.
func clearLeftovers(found []leftover) []error {
	var errs []error
	for _, l := range found {
		var err error
		switch l.kind {
		case "network namespace":
			if err = deleteNetNS(l.name); err == nil {
				_ = os.RemoveAll(filepath.Dir(podnet.Pod{NetNS: l.name}.ResolvConfPath()))
			}
		case "veth", "bridge":
			// Gone already when its namespace went.
			if exec.Command("ip", "link", "show", l.name).Run() == nil {
				err = ipAll([]string{"link", "del", l.name})
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l, err))
		}
	}
	return errs
}

// sweepLeftovers clears every fleet thing that keep does not claim, then
// looks again: what is still there is an error naming each thing.
func sweepLeftovers(keep claims, progress func(leftover)) error {
	found, err := findLeftovers(keep)
	if err != nil {
		return fmt.Errorf("looking for what earlier local fleets left: %w", err)
	}
	if len(found) == 0 {
		return nil
	}
	for _, l := range found {
		progress(l)
	}
	errs := clearLeftovers(found)
	still, err := findLeftovers(keep)
	if err != nil {
		return fmt.Errorf("looking for what earlier local fleets left: %w", err)
	}
	if len(still) > 0 {
		names := make([]string, len(still))
		for i, l := range still {
			names[i] = l.String()
		}
		return fmt.Errorf("what an earlier local fleet left could not be removed: %s (%w); remove it by hand (ip netns del NAME, ip link del NAME, kill PID) and try again",
			strings.Join(names, "; "), errors.Join(errs...))
	}
	return nil
}

// processesIn maps each named namespace to the processes inside it, found
// by the namespace's inode in /proc/<pid>/ns/net.
func processesIn(names []string) (map[string][]int, error) {
	byIno := map[uint64]string{}
	for _, n := range names {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(netns.Dir, n), &st); err != nil {
			continue // deleted meanwhile
		}
		byIno[st.Ino] = n
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
			continue // ended meanwhile, or a kernel thread
		}
		if n, ok := byIno[st.Ino]; ok {
			out[n] = append(out[n], pid)
		}
	}
	return out, nil
}

// hostLinks are the names of the host's network interfaces.
func hostLinks() ([]string, error) {
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -o link show: %w", err)
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		// "12: fnh1234abcd@if3: <...": the name ends at '@' or ':'.
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names = append(names, name)
	}
	return names, nil
}

// killAll sends SIGKILL to pids and waits until they are gone.
func killAll(pids []int, timeout time.Duration) error {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for processExists(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d did not end on SIGKILL within %s", pid, timeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// processExists is false once pid has ended (a zombie has ended: only its
// parent's wait is missing).
func processExists(pid int) bool {
	_, state, err := procStat(pid)
	return err == nil && state != "Z" && state != "X"
}

// deleteNetNS ends the processes inside the named namespace and deletes
// it, so that the namespace is really gone rather than only its name; one
// that does not exist is not an error.
func deleteNetNS(name string) error {
	if _, err := os.Stat(filepath.Join(netns.Dir, name)); err != nil {
		return nil
	}
	inside, err := processesIn([]string{name})
	if err != nil {
		return err
	}
	if err := killAll(inside[name], 10*time.Second); err != nil {
		return fmt.Errorf("network namespace %s: %w", name, err)
	}
	return ipAll([]string{"netns", "del", name})
}
