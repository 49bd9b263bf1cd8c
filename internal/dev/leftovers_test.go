package dev

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/netns"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// leftoverNamespace makes a network namespace named like a pod's, with a
// veth whose host end is named like a pod's and a process inside, as a
// fleet that ended without `dev down` finishing leaves them.
func leftoverNamespace(t *testing.T) (ns, veth string, pid int) {
	t.Helper()
	if err := NodeRequirements(); err != nil {
		t.Fatalf("%v (the test makes network namespaces)", err)
	}
	suffix := fmt.Sprintf("%08x", uint32(os.Getpid())<<8|uint32(len(t.Name())))
	ns, veth = netnsPrefix+"t"+suffix, podVethPrefix+suffix
	if err := ipAll(
		[]string{"netns", "add", ns},
		[]string{"link", "add", veth, "type", "veth", "peer", "name", "fnq" + suffix},
		[]string{"link", "set", "fnq" + suffix, "netns", ns},
	); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", veth).Run()
		_ = exec.Command("ip", "netns", "del", ns).Run()
	})
	cmd := exec.Command("ip", "netns", "exec", ns, "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// ip netns exec switches namespace before it execs sleep: wait until
	// the process is inside.
	testkit.Until(t, 10*time.Second, fmt.Sprintf("process %d inside %s", cmd.Process.Pid, ns), func() bool {
		inside, err := processesIn([]string{ns})
		return err == nil && slices.Contains(inside[ns], cmd.Process.Pid)
	})
	// Reaped by the cleanup; killAll counts a zombie as ended.
	return ns, veth, cmd.Process.Pid
}

func TestLeftoversFoundAndCleared(t *testing.T) {
	ns, veth, pid := leftoverNamespace(t)

	// Claimed by a running fleet: not a leftover.
	found, err := findLeftovers(claims{ns: true, veth: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range found {
		if l.name == ns || l.name == veth {
			t.Errorf("claimed %s reported as a leftover", l)
		}
	}

	found, err = findLeftovers(claims{"something else": true})
	if err != nil {
		t.Fatal(err)
	}
	var ours []leftover
	for _, l := range found {
		switch l.name {
		case ns:
			if !slices.Contains(l.pids, pid) {
				t.Errorf("%s: want process %d inside", l, pid)
			}
			ours = append(ours, l)
		case veth:
			ours = append(ours, l)
		case BridgeName:
			t.Errorf("the bridge is a leftover while a fleet claims names")
		}
	}
	if len(ours) != 2 {
		t.Fatalf("leftovers %v, want the namespace %s and the veth %s among them", found, ns, veth)
	}
	if errs := clearLeftovers(ours); len(errs) > 0 {
		t.Fatal(errs)
	}
	if processExists(pid) {
		t.Errorf("process %d inside the leftover namespace still runs", pid)
	}
	if _, err := os.Stat(filepath.Join(netns.Dir, ns)); err == nil {
		t.Errorf("namespace %s still exists", ns)
	}
	if exec.Command("ip", "link", "show", veth).Run() == nil {
		t.Errorf("veth %s still exists", veth)
	}
}

// TestDeleteNetNSEndsWhatRunsInside: deleting only the name would leave
// the namespace alive around its process (and a kube-proxy inside it
// programming a node nobody sees).
func TestDeleteNetNSEndsWhatRunsInside(t *testing.T) {
	ns, _, pid := leftoverNamespace(t)
	if err := deleteNetNS(ns); err != nil {
		t.Fatal(err)
	}
	if processExists(pid) {
		t.Errorf("process %d inside %s still runs", pid, ns)
	}
	if _, err := os.Stat(filepath.Join(netns.Dir, ns)); err == nil {
		t.Errorf("namespace %s still exists", ns)
	}
	if err := deleteNetNS(ns); err != nil {
		t.Errorf("deleting a namespace that is gone: %v", err)
	}
}
