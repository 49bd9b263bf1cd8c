package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/fleetnet/fleetnet/internal/pki"
)

// FuzzRequests sends any method, path, query and body, with a read or a
// register token, to the API over TLS: the server never panics or answers
// 5xx, and an answer to a path of the OpenAPI document is as the document
// says. Watches are read for a moment only.
func FuzzRequests(f *testing.F) {
	env := discoverytest.Start(f, discoverytest.Options{})
	if _, err := env.Memory.Register(context.Background(), "fuzz", discoverytest.Registration("demo", "model", "east", "eu-west-1", "a", "b")); err != nil {
		f.Fatal(err)
	}
	cfg, err := pki.ClientTLS(env.CA.CertPEM, nil)
	if err != nil {
		f.Fatal(err)
	}
	base := &http.Transport{TLSClientConfig: cfg}
	f.Cleanup(base.CloseIdleConnections)
	hc := &http.Client{Transport: base}
	for _, s := range []struct {
		method, path, query, body string
		register                  bool
	}{
		{"GET", "/v1/pools", "namespace=demo&labelSelector=app%3Dx", "", false},
		{"GET", "/v1/pools/demo/model", "region=eu-west-1", "", false},
		{"GET", "/v1/routers", "", "", false},
		{"GET", "/v1/watch", "revision=1", "", false},
		{"POST", "/v1/registrations", "", `{"namespace":"demo","pool":"model","cluster":"east","region":"eu","instanceID":"x","addresses":["10.0.0.1"],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}`, true},
		{"PUT", "/v1/registrations/lease-1", "", `{"ttlSeconds":-1}`, true},
		{"DELETE", "/v1/registrations/%2e%2e", "", "", true},
		{"GET", "/v1/pools", "labelSelector=%28%28", "", false},
		{"POST", "/v1/registrations", "", `{"addresses":["::ffff:1.2.3.4","x"],"ports":[{"port":70000}]}`, true},
	} {
		f.Add(s.method, s.path, s.query, s.body, s.register)
	}
	f.Fuzz(func(t *testing.T, method, path, query, body string, registerToken bool) {
		u, err := url.Parse(env.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		u.Path, u.RawQuery = path, query
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, u.String(), strings.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		token := discoverytest.ReadToken
		if registerToken {
			token = discoverytest.RegisterToken
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return
			}
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s %s: reading: %v", method, u, err)
		}
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s %s answered %d: %s", method, u, resp.StatusCode, got)
		}
		if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			return // a stream cut short, or a body the document does not describe
		}
		check, _ := http.NewRequest(method, u.String(), nil)
		if verr := env.Validator.Validate(check, resp.StatusCode, resp.Header, bytes.Clone(got)); verr != nil &&
			!strings.Contains(verr.Error(), "is not in the OpenAPI document") {
			t.Fatal(verr)
		}
	})
}
