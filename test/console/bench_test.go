package console

import (
	"runtime"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"github.com/fleetnet/fleetnet/internal/console/model"
	"github.com/fleetnet/fleetnet/internal/testkit/browser"
)

// BenchmarkConsoleAtScale loads the console of a fleet of 100 clusters and
// 5,000 services, each exported by three clusters, in chromium: the time
// from navigation to the services page's first rows, and to a search's
// answer, the page's JavaScript heap, and the model's heap in the server.
func BenchmarkConsoleAtScale(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := model.New()
	synthetic(m, 100, 5000)
	runtime.GC()
	runtime.ReadMemStats(&after)
	base := console(b, m)
	ctx := browser.New(b)
	login(b, ctx, base)
	if _, err := chromedp.Call(ctx, performance.Enable, performance.EnableParams{}); err != nil {
		b.Fatal(err)
	}
	var load, search time.Duration
	b.ResetTimer()
	for range b.N {
		browser.Do(b, ctx, "blank", chromedp.Navigate("about:blank"))
		start := time.Now()
		browser.Do(b, ctx, "services page",
			chromedp.Navigate(base+"/#/services"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-service="ns-0/svc-00000"]`)),
		)
		load += time.Since(start)
		start = time.Now()
		browser.Do(b, ctx, "search",
			chromedp.SendKeys(chromedp.CSS(`#search`), "svc-040 cluster:cluster-099"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-service="ns-8/svc-04099"]`)),
		)
		search += time.Since(start)
	}
	b.StopTimer()
	if r := browser.Text(b, ctx, `#range`); r != "1–3 of 3" {
		b.Errorf("search found %q, want 1–3 of 3", r)
	}
	metrics, err := chromedp.Call(ctx, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		b.Fatal(err)
	}
	for _, mt := range metrics.Metrics {
		if mt.Name == "JSHeapUsedSize" {
			b.ReportMetric(mt.Value/(1<<20), "page-heap-MiB")
		}
	}
	b.ReportMetric(float64(load.Milliseconds())/float64(b.N), "load-ms")
	b.ReportMetric(float64(search.Milliseconds())/float64(b.N), "search-ms")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "model-heap-MiB")
}
