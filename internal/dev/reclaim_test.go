package dev

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/internal/netns"
)

// writeFleet writes a fleet folder whose state records the given processes.
func writeFleet(t *testing.T, processes map[string]ProcessState) string {
	t.Helper()
	dir := t.TempDir()
	data, err := json.Marshal(&State{Version: stateVersion, Dir: dir, Processes: processes})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestFleetRuns(t *testing.T) {
	start, _, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	alive := ProcessState{Pid: os.Getpid(), StartTime: start}
	dead := ProcessState{Pid: 1 << 30, StartTime: start}
	locked := writeFleet(t, map[string]ProcessState{ComponentEtcd: dead})
	unlock, err := lock(locked)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	tests := []struct {
		name string
		dir  string
		want bool
	}{
		{"a process alive", writeFleet(t, map[string]ProcessState{ComponentEtcd: dead, ComponentRegistry: alive}), true},
		{"every process gone (killed before dev down)", writeFleet(t, map[string]ProcessState{ComponentEtcd: dead}), false},
		{"a command holds its lock (dev up under way)", locked, true},
		{"folder removed", filepath.Join(t.TempDir(), "gone"), false},
	}
	for _, tt := range tests {
		if got := fleetRuns(tt.dir); got != tt.want {
			t.Errorf("%s: fleetRuns = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A fleet killed before `dev down` leaves its node namespaces; the next
// root fleet takes them over instead of refusing to start (CI of stop 35
// failed so), while a running fleet's stay and are named.
func TestReclaimNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("node namespaces need root: run the tests as root (sudo make test)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("ip is missing: run `make deps` (iproute2)")
	}
	start, _, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		owner   string
		wantErr bool
	}{
		{"owner's folder removed", filepath.Join(t.TempDir(), "gone"), false},
		{"owner runs", writeFleet(t, map[string]ProcessState{ComponentEtcd: {Pid: os.Getpid(), StartTime: start}}), true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ClusterState{Name: fmt.Sprintf("reclaim%d-%d", i, os.Getpid())}
			ns := c.NodeNetNS()
			if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
				t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
			}
			t.Cleanup(func() {
				_ = exec.Command("ip", "netns", "del", ns).Run()
				_ = os.Remove(filepath.Join(nodeOwners, ns))
			})
			if err := os.MkdirAll(nodeOwners, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(nodeOwners, ns), []byte(tt.owner+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var progress bytes.Buffer
			err := reclaimNodes(t.TempDir(), []ClusterState{c}, &progress)
			_, statErr := os.Stat(filepath.Join(netns.Dir, ns))
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "belongs to the fleet in "+tt.owner) {
					t.Fatalf("reclaimNodes = %v, want an error naming the fleet in %s", err, tt.owner)
				}
				if statErr != nil {
					t.Fatalf("the running fleet's namespace %s was removed", ns)
				}
				return
			}
			if err != nil {
				t.Fatalf("reclaimNodes: %v", err)
			}
			if statErr == nil {
				t.Fatalf("namespace %s of the stopped fleet is still there", ns)
			}
			if nodeOwner(ns) != "" {
				t.Fatalf("owner record of %s is still there", ns)
			}
			if !strings.Contains(progress.String(), tt.owner) {
				t.Fatalf("progress %q does not name the stopped fleet", progress.String())
			}
		})
	}
}
