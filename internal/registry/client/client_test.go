package client

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitAddresses(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "127.0.0.1:7443", want: []string{"127.0.0.1:7443"}},
		{in: "a.example:7443, b.example:7443", want: []string{"a.example:7443", "b.example:7443"}},
		{in: "[::1]:7443,127.0.0.1:7444", want: []string{"[::1]:7443", "127.0.0.1:7444"}},
		{in: "", err: "no registry address"},
		{in: "127.0.0.1", err: `registry address "127.0.0.1"`},
		{in: "127.0.0.1:7443,", err: `registry address ""`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := SplitAddresses(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestDialRefusesABadAddressList(t *testing.T) {
	if _, _, err := Dial(Options{Address: "127.0.0.1:1,nope", CAFile: "unused"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("Dial: %v, want the bad address named", err)
	}
}
