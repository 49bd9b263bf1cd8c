package logging

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		// logged is what an info and a debug line leave, "" for nothing.
		info, debug string
	}{
		{nil, "", `"msg":"i"`, ""},
		{[]string{"--log-level=debug"}, "", `"msg":"i"`, `"msg":"d"`},
		{[]string{"--log-level=error"}, "", "", ""},
		{[]string{"--log-format=text"}, "", "msg=i", ""},
		{[]string{"--log-level=loud"}, "--log-level=loud: must be debug, info, warn or error", "", ""},
		{[]string{"--log-format=xml"}, "--log-format=xml: must be json or text", "", ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var o Options
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			log, err := o.New(&buf)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info("i")
			if got := buf.String(); (tt.info == "") != (got == "") || !strings.Contains(got, tt.info) {
				t.Errorf("info line %q, want it to contain %q", got, tt.info)
			}
			buf.Reset()
			log.Debug("d")
			if got := buf.String(); (tt.debug == "") != (got == "") || !strings.Contains(got, tt.debug) {
				t.Errorf("debug line %q, want it to contain %q", got, tt.debug)
			}
		})
	}
}
