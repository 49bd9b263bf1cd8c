package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// bodyExcerpt is how much of a response body goes into a message: enough to
// see what the application said, short enough for an event.
const bodyExcerpt = 256

// maxRedirects is the kubelet's (and net/http's) limit on redirects to the
// same host.
const maxRedirects = 10

// fallbackKubeVersion is used when the build carries no module versions
// (a binary built outside module mode); it is the release of the k8s.io/api
// this module required when it was written.
const fallbackKubeVersion = "1.37"

// userAgent is the kubelet's probe User-Agent for the Kubernetes release
// whose API this binary is built against.
var userAgent = "kube-probe/" + kubeVersion()

// kubeVersion returns the Kubernetes major.minor matching the k8s.io/api
// module in the build, so the User-Agent follows dependency upgrades.
func kubeVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "k8s.io/api" {
				if v, ok := kubeVersionOf(m.Version); ok {
					return v
				}
			}
		}
	}
	return fallbackKubeVersion
}

// kubeVersionOf maps a k8s.io/api version (v0.37.2) to the Kubernetes
// release it belongs to (1.37).
func kubeVersionOf(apiVersion string) (string, bool) {
	rest, ok := strings.CutPrefix(apiVersion, "v0.")
	if !ok {
		return "", false
	}
	minor, _, _ := strings.Cut(rest, ".")
	if _, err := strconv.Atoi(minor); err != nil {
		return "", false
	}
	return "1." + minor, true
}

// httpProbe runs an httpGet probe: 200 <= status < 400 passes.
func httpProbe(ctx context.Context, h *corev1.HTTPGetAction, timeout time.Duration, podIP string, c *corev1.Container, t Target) (Result, string) {
	req, err := newHTTPRequest(ctx, h, podIP, c)
	if err != nil {
		return Unknown, err.Error()
	}
	client := &http.Client{
		Timeout: timeout,
		// A fresh transport per attempt: it dials through this Target, and
		// keep-alives are off, so there is nothing to share between
		// attempts.
		Transport: &http.Transport{
			Proxy:       nil, // never the node's proxy settings
			DialContext: t.DialContext,
			// HTTPS probes check that the server answers, not who it is.
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true},
			ForceAttemptHTTP2:  true, // as the kubelet, whose HTTPS probes negotiate HTTP/2
			DisableKeepAlives:  true,
			DisableCompression: true, // no Accept-Encoding the application did not ask for
		},
		CheckRedirect: checkRedirect,
	}
	res, err := client.Do(req)
	if err != nil {
		// Refused connections and timeouts are failures, not errors.
		return Failure, err.Error()
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxOutput))
	if err != nil {
		// The kubelet treats a body it cannot read as a probe error, which
		// it throws away.
		return Unknown, fmt.Sprintf("reading the response body: %v", err)
	}
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return Success, ""
	case res.StatusCode >= 300 && res.StatusCode < 400:
		// A redirect checkRedirect did not follow (another host) or one
		// without a Location: success with a warning, as in the kubelet.
		return Success, "Probe terminated redirects" + excerpt(body)
	default:
		return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode) + excerpt(body)
	}
}

// newHTTPRequest builds the kubelet's request for h: the pod IP when no host
// is given, the kubelet's User-Agent and Accept unless h sets them, and a
// Host header taken as the request's host.
func newHTTPRequest(ctx context.Context, h *corev1.HTTPGetAction, podIP string, c *corev1.Container) (*http.Request, error) {
	port, err := resolvePort(h.Port, c)
	if err != nil {
		return nil, err
	}
	scheme := strings.ToLower(string(h.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := h.Host
	if host == "" {
		host = podIP
	}
	u, err := url.Parse(h.Path)
	if err != nil {
		// The kubelet passes a path it cannot parse along as it is rather
		// than refuse a probe the API server accepted.
		u = &url.URL{Path: h.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the request for %s: %w", u, err)
	}
	header := make(http.Header)
	for _, hh := range h.HTTPHeaders {
		header.Add(hh.Name, hh.Value)
	}
	if _, ok := header["User-Agent"]; !ok {
		header.Set("User-Agent", userAgent)
	}
	if _, ok := header["Accept"]; !ok {
		header.Set("Accept", "*/*")
	} else if header.Get("Accept") == "" {
		// An empty Accept asks for none to be sent.
		header.Del("Accept")
	}
	req.Header = header
	// net/http ignores a Host in the header map; the request's Host is what
	// it sends.
	req.Host = header.Get("Host")
	return req, nil
}

// checkRedirect follows redirects to the host first asked (any port) and
// stops at others, which the kubelet does so a probe cannot be sent
// elsewhere by the application; the 3xx response is then the result.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// excerpt returns the start of body for a message, or nothing for an empty
// body.
func excerpt(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	if len(body) <= bodyExcerpt {
		return fmt.Sprintf(", response body: %q", body)
	}
	// Cut at the start of a character, not in the middle of one.
	cut := bodyExcerpt
	for cut > bodyExcerpt-utf8.UTFMax && !utf8.RuneStart(body[cut]) {
		cut--
	}
	return fmt.Sprintf(", response body: %q…", body[:cut])
}
