package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestValidate(t *testing.T) {
	base := []string{"--registry=127.0.0.1:7443", "--registry-ca-file=ca.crt", "--registry-cert-file=admin.crt", "--registry-key-file=admin.key", "--tokens-file=tokens.csv"}
	for _, tc := range []struct {
		name string
		args []string
		want string // "" for valid
	}{
		{"defaults", nil, ""},
		{"plain HTTP off loopback", []string{"--listen=:7490"}, `--listen=":7490": plain HTTP is served on a loopback address only`},
		{"loopback by name", []string{"--listen=localhost:7490"}, ""},
		{"TLS anywhere", []string{"--listen=:7490", "--tls-cert-file=c", "--tls-key-file=k"}, ""},
		{"client CA without TLS", []string{"--client-ca-file=ca.crt"}, `--client-ca-file="ca.crt": client certificates need TLS`},
		{"two identities", []string{"--registry-token-file=t"}, `--registry-cert-file="admin.crt" and --registry-token-file="t": give one`},
		{"edge URL", []string{"--edge-metrics=127.0.0.1:9090"}, `--edge-metrics="127.0.0.1:9090": want http(s)://HOST:PORT/metrics`},
		{"interval", []string{"--clusters-interval=10ms"}, `--clusters-interval=10ms: must be from 200ms to 1m0s`},
		{"hub off with a kubeconfig", []string{"--hub=false", "--kubeconfig=k"}, `--kubeconfig="k" --context="": only with --hub`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			fs := pflag.NewFlagSet("console", pflag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(append(append([]string{}, base...), tc.args...)); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	var o Options
	fs := pflag.NewFlagSet("console", pflag.ContinueOnError)
	o.BindFlags(fs)
	_ = fs.Parse(nil)
	err := o.Validate()
	for _, want := range []string{"no authentication", "--registry: required", "--registry-ca-file: required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no flags: %v, want %q", err, want)
		}
	}
}
