package dev

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/controlplane"
)

func TestUpRefusesBadInputAndLeavesNothingBehind(t *testing.T) {
	// A port of the fleet held by someone else.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	busy := l.Addr().(*net.TCPAddr).Port

	emptyBin := t.TempDir()
	tests := []struct {
		name string
		opts func(o *Options)
		want []string
	}{
		{"invalid cluster name", func(o *Options) { o.Clusters = []string{"hub", "East_1"} }, []string{`--clusters: "East_1"`}},
		{"cluster named twice", func(o *Options) { o.Clusters = []string{"hub", "hub"} }, []string{`"hub" is named twice`}},
		{"dual-stack names an unknown cluster", func(o *Options) { o.DualStack = []string{"south"} }, []string{`--dual-stack: "south"`}},
		{"lease TTL too short", func(o *Options) { o.LeaseTTL = time.Millisecond }, []string{"--lease-ttl=1ms"}},
		{"cluster named like a certificate", func(o *Options) { o.Clusters = []string{"admin"} }, []string{`"admin" is the name of a fleet component's certificate or folder`}},
		{"cluster named like a component", func(o *Options) { o.Clusters = []string{"hub", "discovery"} }, []string{`"discovery" is the name of a fleet component's certificate or folder`}},
		{"port in use", func(o *Options) { o.BasePort = busy - offsetRegistry }, []string{"port " + strconv.Itoa(busy) + " (registry) is in use", "--base-port"}},
		{"missing binaries", func(o *Options) {}, []string{
			filepath.Join(emptyBin, "kube-apiserver") + " is missing: run `make tools`",
			filepath.Join(emptyBin, "fleetnet-agent") + " is missing: run `make build`",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "fleet")
			o := Options{
				Dir: dir, Clusters: []string{"hub", "east"}, BasePort: 40000, LeaseTTL: 10 * time.Second,
				Tools: controlplane.Binaries{Dir: emptyBin}, Fleetnet: emptyBin,
			}
			tt.opts(&o)
			_, err := Up(context.Background(), o)
			if err == nil {
				t.Fatal("Up succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the failed Up left %s behind (%v)", dir, err)
			}
		})
	}
}

func TestUpRefusesAFolderWithOtherFiles(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(mine, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Up(context.Background(), Options{
		Dir: dir, Clusters: []string{"hub"}, BasePort: 40000, LeaseTTL: 10 * time.Second,
		Tools: controlplane.Binaries{Dir: t.TempDir()}, Fleetnet: t.TempDir(),
	})
	if err == nil || !strings.Contains(err.Error(), "holds other files") {
		t.Fatalf("Up in a folder with other files: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatalf("the user's file is gone: %v", err)
	}
}

func TestProcessStateAlive(t *testing.T) {
	start, _, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		p    ProcessState
		want bool
	}{
		{"this process", ProcessState{Pid: os.Getpid(), StartTime: start}, true},
		{"same pid, other start time (pid reused)", ProcessState{Pid: os.Getpid(), StartTime: start + 1}, false},
		{"no pid", ProcessState{}, false},
		{"no such process", ProcessState{Pid: 1 << 30, StartTime: start}, false},
	}
	for _, tt := range tests {
		if got := tt.p.Alive(); got != tt.want {
			t.Errorf("%s: Alive() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestLoadWithoutFleetSaysHowToStartOne(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "fleetnetctl dev up --dir "+dir) {
		t.Fatalf("Load of an empty folder: %v", err)
	}
	if err := Down(dir, nil); err != nil {
		t.Fatalf("Down of a folder without a fleet: %v", err)
	}
}
