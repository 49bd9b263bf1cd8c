// Package browser runs the console's browser tests: Debian's chromium,
// headless, driven with chromedp. A missing chromium fails the test with
// the command that installs it; screenshots go to _output/screenshots of
// the checkout (FLEETNET_SCREENSHOTS overrides), kept after the run as
// test artifacts.
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Width and Height are the window's size: the console's default, the size
// of the screenshots in docs/.
const (
	Width  = 1280
	Height = 800
)

// Path finds chromium.
func Path() (string, error) {
	var err error
	for _, name := range []string{"chromium", "chromium-browser"} {
		var p string
		if p, err = exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", err
}

// New starts a headless chromium for the test and returns a context of a
// tab; the browser ends with the test.
func New(t testing.TB) context.Context {
	t.Helper()
	path, err := Path()
	if err != nil {
		t.Fatalf("chromium is needed for the console's browser tests and is not installed: run `make deps` (or as root: apt-get install chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(Width, Height),
		chromedp.DisableGPU,
		// The test machine runs as root, where chromium's sandbox can't start.
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// The first run starts the browser, which lives as long as ctx: no
	// timeout on it (see chromedp.Run).
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium %s: %v", path, err)
	}
	return ctx
}

// Screenshot writes the tab's viewport as NAME.png to the screenshots
// folder and returns its path.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := Dir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
	return path
}

// Dir is where screenshots go.
func Dir() string {
	if d := os.Getenv("FLEETNET_SCREENSHOTS"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "_output", "screenshots")
}

// Do runs steps on the tab within 30 seconds; what names them in the
// failure.
func Do(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Text is the visible text of the first element selector matches.
func Text(t testing.TB, ctx context.Context, selector string) string {
	t.Helper()
	return Get(t, ctx, "text of "+selector, chromedp.Text(chromedp.CSS(selector)))
}

// Eval is the value of a JavaScript expression in the page.
func Eval[T any](t testing.TB, ctx context.Context, expression string) T {
	t.Helper()
	return Get(t, ctx, expression, chromedp.Evaluate[T](expression))
}

// Get runs an action that returns a value, within 30 seconds.
func Get[T any](t testing.TB, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}
