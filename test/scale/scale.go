// Package scale runs the registry as it runs in production: a 3-member etcd
// cluster (three etcd processes on loopback, from bin/etcd) and registry
// replicas (fleetnet-registry processes) serving from it, with a fleet CA.
// The high-availability tests kill its members, and `make bench-scale`
// loads it with the fleet load generator (internal/registry/load).
package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/testkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Options shape a registry deployment.
type Options struct {
	// Dir holds data directories, certificates and logs.
	Dir string
	// RegistryBinary is the fleetnet-registry executable (see BuildRegistry).
	RegistryBinary string
	// Members is the size of the etcd cluster (3 when zero).
	Members int
	// Replicas is how many registry replicas serve (2 when zero).
	Replicas int
	// LeaseTTL is the registry's --lease-ttl (30s when zero).
	LeaseTTL time.Duration
	// NoFsync runs etcd with --unsafe-no-fsync. Durability against a
	// killed process does not need fsync (the kernel keeps what was
	// written); against a lost machine it does, so benchmarks keep it.
	NoFsync bool
}

// Deployment is a running etcd cluster with registry replicas.
type Deployment struct {
	Options
	// CA is the fleet CA; CAFile its certificate, which also signed the
	// registry's serving certificate.
	CA     *pki.KeyPair
	CAFile string
	// CertDir holds ca.crt, registry.crt/.key and admin.crt/.key.
	CertDir  string
	Members  []*Member
	Replicas []*Replica
}

// Member is one etcd process.
type Member struct {
	Name               string
	ClientURL, PeerURL string
	args               []string
	dir                string
	Proc               *controlplane.Process
}

// Replica is one fleetnet-registry process.
type Replica struct {
	Addr, MetricsAddr string
	args              []string
	dir               string
	Proc              *controlplane.Process
}

// BuildRegistry compiles fleetnet-registry into dir.
func BuildRegistry(dir string) (string, error) {
	out := filepath.Join(dir, "fleetnet-registry")
	cmd := exec.Command("go", "build", "-o", out, "github.com/fleetnet/fleetnet/cmd/fleetnet-registry")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building fleetnet-registry: %w", err)
	}
	return out, nil
}

// Start brings up the etcd cluster, then the replicas, and waits until
// every replica serves. On error, what was started is stopped.
func Start(ctx context.Context, o Options) (d *Deployment, err error) {
	if o.Members == 0 {
		o.Members = 3
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 30 * time.Second
	}
	d = &Deployment{Options: o, CertDir: filepath.Join(o.Dir, "certs")}
	defer func() {
		if err != nil {
			d.Close()
			d = nil
		}
	}()
	if err := d.writeCerts(); err != nil {
		return nil, err
	}
	bins, err := controlplane.FindBinaries()
	if err != nil {
		return nil, err
	}
	etcdPath, err := bins.Path(controlplane.EtcdBinary)
	if err != nil {
		return nil, err
	}
	var cluster []string
	for i := range o.Members {
		ports, err := testkit.PickFreePorts(2)
		if err != nil {
			return nil, err
		}
		m := &Member{Name: fmt.Sprintf("m%d", i), ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
			dir: filepath.Join(o.Dir, fmt.Sprintf("etcd-%d", i))}
		cluster = append(cluster, m.Name+"="+m.PeerURL)
		d.Members = append(d.Members, m)
	}
	for _, m := range d.Members {
		m.args = []string{
			"--name=" + m.Name,
			"--data-dir=" + filepath.Join(m.dir, "data"),
			"--listen-client-urls=" + m.ClientURL,
			"--advertise-client-urls=" + m.ClientURL,
			"--listen-peer-urls=" + m.PeerURL,
			"--initial-advertise-peer-urls=" + m.PeerURL,
			"--initial-cluster=" + strings.Join(cluster, ","),
			"--initial-cluster-state=new",
			"--initial-cluster-token=fleetnet-scale",
			"--log-level=warn",
			"--quota-backend-bytes=8589934592",
		}
		if o.NoFsync {
			m.args = append(m.args, "--unsafe-no-fsync")
		}
		if m.Proc, err = controlplane.Start("etcd "+m.Name, etcdPath, m.args, filepath.Join(m.dir, "etcd.log"), controlplane.StartOptions{}); err != nil {
			return nil, err
		}
	}
	for _, m := range d.Members {
		if err := m.waitHealthy(ctx); err != nil {
			return nil, err
		}
	}
	for i := range o.Replicas {
		ports, err := testkit.PickFreePorts(2)
		if err != nil {
			return nil, err
		}
		r := &Replica{Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), MetricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]), dir: filepath.Join(o.Dir, fmt.Sprintf("registry-%d", i))}
		r.args = []string{
			"--listen=" + r.Addr, "--metrics-listen=" + r.MetricsAddr,
			"--tls-cert-file=" + filepath.Join(d.CertDir, "registry.crt"),
			"--tls-key-file=" + filepath.Join(d.CertDir, "registry.key"),
			"--client-ca-file=" + d.CAFile,
			"--etcd-endpoints=" + d.EtcdEndpoints(),
			"--lease-ttl=" + o.LeaseTTL.String(),
		}
		d.Replicas = append(d.Replicas, r)
		if err := d.StartReplica(ctx, i); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *Deployment) writeCerts() error {
	ca, err := pki.NewCA("fleetnet-scale-ca")
	if err != nil {
		return err
	}
	if err := ca.Write(d.CertDir, "ca"); err != nil {
		return err
	}
	serving, err := ca.ServingCert("fleetnet-registry", []string{"127.0.0.1", "localhost"})
	if err != nil {
		return err
	}
	if err := serving.Write(d.CertDir, "registry"); err != nil {
		return err
	}
	admin, err := ca.AdminCert("admin")
	if err != nil {
		return err
	}
	if err := admin.Write(d.CertDir, "admin"); err != nil {
		return err
	}
	d.CA, d.CAFile = ca, filepath.Join(d.CertDir, "ca.crt")
	return nil
}

// EtcdEndpoints are the members' client URLs, comma-separated.
func (d *Deployment) EtcdEndpoints() string {
	var out []string
	for _, m := range d.Members {
		out = append(out, m.ClientURL)
	}
	return strings.Join(out, ",")
}

// Address is every replica's address, comma-separated, as agents are given
// it.
func (d *Deployment) Address() string {
	var out []string
	for _, r := range d.Replicas {
		out = append(out, r.Addr)
	}
	return strings.Join(out, ",")
}

// AdminOptions dial every replica as the admin.
func (d *Deployment) AdminOptions() client.Options {
	return client.Options{Address: d.Address(), CAFile: d.CAFile,
		CertFile: filepath.Join(d.CertDir, "admin.crt"), KeyFile: filepath.Join(d.CertDir, "admin.key")}
}

// ReplicaOptions dial replica i alone as the admin.
func (d *Deployment) ReplicaOptions(i int) client.Options {
	o := d.AdminOptions()
	o.Address = d.Replicas[i].Addr
	return o
}

// Etcd returns a client of the etcd cluster; the caller closes it.
func (d *Deployment) Etcd() (*clientv3.Client, error) {
	var eps []string
	for _, m := range d.Members {
		eps = append(eps, m.ClientURL)
	}
	return clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
}

// Leader returns the member that leads the etcd cluster now.
func (d *Deployment) Leader(ctx context.Context) (*Member, error) {
	c, err := d.Etcd()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var errs []error
	for _, m := range d.Members {
		if exited, _ := m.Proc.Exited(); exited {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := c.Status(sctx, m.ClientURL)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("status of %s: %w", m.Name, err))
			continue
		}
		if st.Leader != 0 && st.Leader == st.Header.GetMemberId() {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no etcd member says it leads: %w", errors.Join(errs...))
}

// RestartMember starts a member again on its data directory.
func (d *Deployment) RestartMember(ctx context.Context, m *Member) error {
	if exited, _ := m.Proc.Exited(); !exited {
		return fmt.Errorf("etcd %s is still running", m.Name)
	}
	bins, err := controlplane.FindBinaries()
	if err != nil {
		return err
	}
	path, err := bins.Path(controlplane.EtcdBinary)
	if err != nil {
		return err
	}
	if m.Proc, err = controlplane.Start("etcd "+m.Name, path, m.args, filepath.Join(m.dir, "etcd.log"), controlplane.StartOptions{}); err != nil {
		return err
	}
	return m.waitHealthy(ctx)
}

func (m *Member) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return m.Proc.WaitFor(ctx, "health", func(ctx context.Context) error { return controlplane.HTTPOK(ctx, m.ClientURL+"/health") })
}

// StartReplica starts replica i (again) and waits until it is ready: its
// view is loaded.
func (d *Deployment) StartReplica(ctx context.Context, i int) error {
	r := d.Replicas[i]
	if r.Proc != nil {
		if exited, _ := r.Proc.Exited(); !exited {
			return fmt.Errorf("registry replica %d is still running", i)
		}
	}
	var err error
	if r.Proc, err = controlplane.Start(fmt.Sprintf("fleetnet-registry %d", i), d.RegistryBinary, r.args, filepath.Join(r.dir, "registry.log"), controlplane.StartOptions{}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return r.Proc.WaitFor(ctx, "ready", func(ctx context.Context) error { return controlplane.HTTPOK(ctx, "http://"+r.MetricsAddr+"/readyz") })
}

// KillAll kills (SIGKILL) every replica and every etcd member.
func (d *Deployment) KillAll() {
	for _, r := range d.Replicas {
		r.Proc.Kill()
	}
	for _, m := range d.Members {
		m.Proc.Kill()
	}
}

// Restart starts every etcd member that is not running, all at once (a
// member alone has no quorum and never becomes healthy), waits until they
// are healthy, then starts every replica that is not running.
func (d *Deployment) Restart(ctx context.Context) error {
	bins, err := controlplane.FindBinaries()
	if err != nil {
		return err
	}
	path, err := bins.Path(controlplane.EtcdBinary)
	if err != nil {
		return err
	}
	var started []*Member
	for _, m := range d.Members {
		if exited, _ := m.Proc.Exited(); !exited {
			continue
		}
		if m.Proc, err = controlplane.Start("etcd "+m.Name, path, m.args, filepath.Join(m.dir, "etcd.log"), controlplane.StartOptions{}); err != nil {
			return err
		}
		started = append(started, m)
	}
	for _, m := range started {
		if err := m.waitHealthy(ctx); err != nil {
			return err
		}
	}
	for i, r := range d.Replicas {
		if exited, _ := r.Proc.Exited(); exited {
			if err := d.StartReplica(ctx, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close stops the replicas, then etcd.
func (d *Deployment) Close() {
	for _, r := range d.Replicas {
		if r.Proc != nil {
			r.Proc.Stop(5 * time.Second)
		}
	}
	for _, m := range d.Members {
		if m.Proc != nil {
			m.Proc.Stop(5 * time.Second)
		}
	}
}

// Usage is what /proc says of a process.
type Usage struct {
	// RSS and PeakRSS (VmHWM) in bytes.
	RSS, PeakRSS int64
	// CPU is user plus system time.
	CPU time.Duration
}

// ProcUsage reads /proc/<pid>/status and /proc/<pid>/stat.
func ProcUsage(pid int) (Usage, error) {
	var u Usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("reading the status of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			u.RSS = kb << 10
		case "VmHWM:":
			u.PeakRSS = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	// The command name in parentheses may hold spaces; fields follow it.
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return u, fmt.Errorf("process %d: malformed stat %q", pid, s)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	// The kernel counts in USER_HZ, 100 per second on Linux.
	u.CPU = time.Duration(utime+stime) * 10 * time.Millisecond
	return u, nil
}
