package charts

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/testkit"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// buildBinary builds cmd/<name> of this checkout in the background, so that
// a proof never runs a stale bin/<name>, and returns a function that waits
// for it.
func buildBinary(t *testing.T, name string) func(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = repoRoot(t)
	done := make(chan error, 1)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	go func() { done <- cmd.Run() }()
	return func(t *testing.T) string {
		t.Helper()
		if err := <-done; err != nil {
			t.Fatalf("building %s: %v\n%s", name, err, log.String())
		}
		done <- nil // a second wait returns at once
		return out
	}
}

// serviceAccountKubeconfig writes a kubeconfig for c into dir that
// authenticates as the ServiceAccount namespace/name alone (a TokenRequest
// token), as the chart's Pod would.
func serviceAccountKubeconfig(t testing.TB, c *cluster, namespace, name, dir string) string {
	t.Helper()
	tr, err := c.clientset.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: requesting a token for the chart's ServiceAccount %s/%s: %v", c.Name, namespace, name, err)
	}
	return writeKubeconfig(t, dir, c, tr.Status.Token)
}

// secretFiles writes the keys of a Secret into dir as files, as the
// kubelet mounts them.
func secretFiles(t testing.TB, c *cluster, namespace, name, dir string) {
	t.Helper()
	s, err := c.clientset.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// deploymentArgs returns the arguments of the first container of a
// Deployment as the chart installed it.
func deploymentArgs(t testing.TB, c *cluster, namespace, name string) []string {
	t.Helper()
	d, err := c.clientset.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

// mapArgs rewrites --flag=value arguments: mapping returns the new value,
// or the value unchanged.
func mapArgs(args []string, mapping func(flag, value string) string) []string {
	out := make([]string, 0, len(args))
	for _, arg := range args {
		flag, value, ok := strings.Cut(arg, "=")
		if !ok {
			out = append(out, arg)
			continue
		}
		out = append(out, flag+"="+mapping(flag, value))
	}
	return out
}

// startDeployment runs binary as the first container of the Deployment
// namespace/deployment in c would run (named name in the test's log): its
// arguments, with its Secrets' files written where mounts says (mount path
// in the container → Secret), the listen, health and metrics addresses on
// free loopback ports, and the registry at registryAddr in place of the
// in-cluster one. extra arguments go first. It returns the process and
// its listen address, once ready.
func startDeployment(t *testing.T, c *cluster, namespace, deployment, name, binary, registryAddr string, mounts map[string]string, extra ...string) (*controlplane.Process, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), c.Name)
	local := func(mount string) string { return filepath.Join(dir, filepath.Base(mount)) }
	for mount, secret := range mounts {
		secretFiles(t, c, namespace, secret, local(mount))
	}
	listen, health := testkit.FreeAddr(t), testkit.FreeAddr(t)
	args := mapArgs(deploymentArgs(t, c, namespace, deployment), func(flag, value string) string {
		switch flag {
		case "--listen":
			return listen
		case "--health-addr":
			return health
		case "--metrics-addr":
			return testkit.FreeAddr(t)
		case "--registry":
			return registryAddr
		}
		for mount := range mounts {
			value = strings.Replace(value, mount, local(mount), 1)
		}
		return value
	})
	p := startChartProcess(t, name, binary, append(extra, args...), dir, "http://"+health+"/readyz")
	return p, listen
}

// startChartProcess runs binary as a local process until the test ends,
// and waits until readyURL answers 200, as the chart's readiness probe
// would; an empty readyURL waits for nothing.
func startChartProcess(t *testing.T, name, binary string, args []string, dir, readyURL string) *controlplane.Process {
	t.Helper()
	p, err := controlplane.Start(name, binary, args, filepath.Join(dir, name+".log"), controlplane.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(15 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", name, controlplane.Tail(p.LogPath, 30))
		}
	})
	t.Logf("%s %s", name, strings.Join(args, " "))
	if readyURL == "" {
		return p
	}
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%s to be ready", name), func(ctx context.Context) error {
		if exited, err := p.Exited(); exited {
			t.Fatalf("%s exited: %v\n%s", name, err, controlplane.Tail(p.LogPath, 20))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", readyURL, resp.Status)
		}
		return nil
	})
	return p
}

// forbiddenLines returns the lines of a process's log that say a request
// was forbidden.
func forbiddenLines(t testing.TB, p *controlplane.Process) []string {
	t.Helper()
	re := regexp.MustCompile(`(?i)forbidden`)
	var out []string
	for _, line := range strings.Split(string(read(t, p.LogPath)), "\n") {
		if re.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// testEveryVerbNeeded shows that the chart's ClusterRole (as installed in
// c) holds no verb too many: for each verb on each resource, start runs
// the chart's binary as a ServiceAccount bound to the role without that
// verb, whose log must then say that the verb on that resource was
// forbidden. The processes inherit this test's environment.
func testEveryVerbNeeded(t *testing.T, c *cluster, roleName string, start func(t *testing.T, name, kubeconfig, dir string) *controlplane.Process) {
	t.Helper()
	role, err := c.clientset.RbacV1().ClusterRoles().Get(context.Background(), roleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, rule := range role.Rules {
		for _, resource := range rule.Resources {
			for _, verb := range rule.Verbs {
				name := fmt.Sprintf("%s-without-%s-%s", roleName, verb, resource)
				t.Run(name, func(t *testing.T) {
					less := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
					for j, r := range role.Rules {
						if j == i {
							r = *r.DeepCopy()
							r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
							if len(r.Resources) > 1 {
								t.Fatalf("rule %d of %s names several resources %v: split it to test them apart", i, roleName, r.Resources)
							}
						}
						less.Rules = append(less.Rules, r)
					}
					if verb == "list" {
						// client-go (v0.35 on) streams an informer's first
						// list through watch (WatchListClient) where the API
						// server serves it, as this fleet's does; list is
						// needed where it does not, or has it off. The
						// client's gate off stands for such a server.
						t.Setenv("KUBE_FEATURE_WatchListClient", "false")
					}
					dir := filepath.Join(t.TempDir(), c.Name)
					cfg := c.AsServiceAccount(t, systemNamespace, name, less)
					kubeconfig := writeKubeconfig(t, dir, c, cfg.BearerToken)
					p := start(t, name, kubeconfig, dir)
					want := regexp.MustCompile(fmt.Sprintf(`cannot %s resource \\?"%s\\?"`, verb, resource))
					testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%s to log a forbidden %s on %s", name, verb, resource), func(context.Context) error {
						for _, line := range forbiddenLines(t, p) {
							if want.MatchString(line) {
								t.Logf("without %s on %s: %s", verb, resource, line)
								return nil
							}
						}
						return fmt.Errorf("%s logged no forbidden %s on %s", name, verb, resource)
					})
					p.Kill()
				})
			}
		}
	}
}
