package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/dev"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// BenchmarkProcessNodePods creates 100 Pods at once on hub's process node
// (the pause image: a `sleep` per Pod) and reports, per Pod, the time from
// its create call returning to the watch seeing it Ready (p50, p99), and
// the process node's resident memory per idle Pod (its growth over the 100
// Pods, besides the Pods' own processes, which are reported apart).
func BenchmarkProcessNodePods(b *testing.B) {
	const pods = 100
	for range b.N {
		ns := namespace(b, fmt.Sprintf("bench-process-node-%d", time.Now().UnixNano()))
		cs := kubernetes.NewForConfigOrDie(restConfig(b, "hub"))
		ctx := context.Background()
		nodePid := state.Processes["hub/"+dev.PartProcessNode].Pid
		before := rssKiB(b, nodePid)

		var mu sync.Mutex
		created := map[string]time.Time{}
		ready := map[string]time.Time{}
		watchCtx, stopWatch := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			// A watch may end early (the API server closes it); it is
			// opened again until every Pod was seen Ready.
			for watchCtx.Err() == nil {
				w, err := cs.CoreV1().Pods(ns).Watch(watchCtx, metav1.ListOptions{})
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				for ev := range w.ResultChan() {
					p, ok := ev.Object.(*corev1.Pod)
					if !ok || ev.Type == watch.Deleted || !podReady(p) {
						continue
					}
					mu.Lock()
					if _, seen := ready[p.Name]; !seen {
						ready[p.Name] = time.Now()
					}
					n := len(ready)
					mu.Unlock()
					if n == pods {
						w.Stop()
						return
					}
				}
			}
		}()
		start := time.Now()
		var wg sync.WaitGroup
		for i := range pods {
			wg.Go(func() {
				name := fmt.Sprintf("idle-%03d", i)
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
				}
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				created[name] = time.Now()
				mu.Unlock()
			})
		}
		wg.Wait()
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			stopWatch()
			b.Fatalf("%d of %d Pods Ready after 5 minutes", len(ready), pods)
		}
		stopWatch()
		all := time.Since(start)
		var lat []time.Duration
		for name, t := range ready {
			lat = append(lat, t.Sub(created[name]))
		}
		slices.Sort(lat)
		after := rssKiB(b, nodePid)
		var podKiB int
		recorded, err := dev.NodePods(fleetDir, "hub")
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range recorded {
			if p.Namespace == ns {
				podKiB += podProcessesKiB(b, p.NetNS)
			}
		}
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ready-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ready-ms")
		b.ReportMetric(all.Seconds(), "all-ready-s")
		b.ReportMetric(float64(after-before)/pods, "node-KiB/pod")
		b.ReportMetric(float64(podKiB)/pods, "container-KiB/pod")
		// The Pods go with the namespace; wait so that the next round and
		// other benchmarks start from an idle node.
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Minute)
		for {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil && len(list.Items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("Pods of %s still there after 3 minutes", ns)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// rssKiB is a process's resident memory.
func rssKiB(b *testing.B, pid int) int {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.Fields(v)[0])
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// podProcessesKiB sums the resident memory of the processes in a Pod's
// network namespace.
func podProcessesKiB(b *testing.B, netNS string) int {
	b.Helper()
	target, err := os.Readlink("/run/netns/" + netNS)
	if err != nil {
		// A named namespace is a bind mount, not a link: compare inodes.
		st, err := os.Stat("/run/netns/" + netNS)
		if err != nil {
			return 0
		}
		target = fmt.Sprintf("net:[%d]", inode(st))
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil || ns != target {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.Fields(v)[0])
				total += n
			}
		}
	}
	return total
}

func inode(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}
