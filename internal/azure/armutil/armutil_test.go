package armutil

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
)

func TestDeref(t *testing.T) {
	if got := Deref[string](nil); got != "" {
		t.Errorf("Deref(nil) = %q", got)
	}
	if got := Deref(to.Ptr(int32(7))); got != 7 {
		t.Errorf("Deref(&7) = %d", got)
	}
}

func TestOwnerKey(t *testing.T) {
	o := Owner{Tag: "owner", Value: "fleet-1", NamespaceTag: "ns", NameTag: "name"}
	tags := func(kv ...string) map[string]*string {
		m := map[string]*string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = to.Ptr(kv[i+1])
		}
		return m
	}
	for _, tt := range []struct {
		name string
		tags map[string]*string
		want string
	}{
		{"owned", tags("owner", "fleet-1", "ns", "web", "name", "public"), "web/public"},
		{"another fleet's", tags("owner", "fleet-2", "ns", "web", "name", "public"), ""},
		{"no namespace", tags("owner", "fleet-1", "name", "public"), ""},
		{"no name", tags("owner", "fleet-1", "ns", "web"), ""},
		{"untagged", nil, ""},
	} {
		if got := o.Key(tt.tags); got != tt.want {
			t.Errorf("%s: Key = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestTags(t *testing.T) {
	want := map[string]*string{"b": to.Ptr("2"), "a": to.Ptr("1"), "c": to.Ptr("3")}
	got := map[string]*string{"a": to.Ptr("1"), "c": to.Ptr("x"), "cost-center": to.Ptr("42")}
	if d := TagDiff(want, got); !slices.Equal(d, []string{"tag b", "tag c"}) {
		t.Errorf("TagDiff = %v", d)
	}
	m := WithTags(want, got)
	if len(m) != 4 || *m["c"] != "3" || *m["cost-center"] != "42" {
		t.Errorf("WithTags kept %v", m)
	}
}

func TestRunning(t *testing.T) {
	for s, want := range map[string]bool{"Creating": true, "Updating": true, "Deleting": true, "Accepted": true, "Succeeded": false, "Failed": false, "": false} {
		if Running(s) != want {
			t.Errorf("Running(%q) = %v", s, !want)
		}
	}
}

func TestClientOptions(t *testing.T) {
	if o := ClientOptions(nil, 0); o.Retry.MaxRetries != DefaultMaxRetries || o.Retry.MaxRetryDelay != DefaultMaxRetryDelay {
		t.Errorf("defaults %+v", o.Retry)
	}
	set := &arm.ClientOptions{ClientOptions: policy.ClientOptions{Retry: policy.RetryOptions{RetryDelay: time.Millisecond}}}
	if o := ClientOptions(set, 0); o.Retry.MaxRetries != 0 || o.Retry.RetryDelay != time.Millisecond {
		t.Errorf("a set Retry was changed: %+v", o.Retry)
	}
	for _, tt := range []struct {
		name       string
		opts       *arm.ClientOptions
		tryTimeout time.Duration
		want       time.Duration
	}{
		{"default", nil, 0, DefaultTryTimeout},
		{"given", nil, 5 * time.Second, 5 * time.Second},
		{"the options'", &arm.ClientOptions{ClientOptions: policy.ClientOptions{Retry: policy.RetryOptions{TryTimeout: time.Second}}}, 0, time.Second},
		{"given over the options'", &arm.ClientOptions{ClientOptions: policy.ClientOptions{Retry: policy.RetryOptions{TryTimeout: time.Second}}}, time.Minute, time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if o := ClientOptions(tt.opts, tt.tryTimeout); o.Retry.TryTimeout != tt.want {
				t.Errorf("TryTimeout %s, want %s", o.Retry.TryTimeout, tt.want)
			}
		})
	}
}

// A hung try ends at the per-try timeout with an error naming the request
// and the bound, wrapping context.DeadlineExceeded; the caller's slice of
// policies is left as it was.
func TestClientOptionsHungTry(t *testing.T) {
	hang := transporterFunc(func(req *http.Request) (*http.Response, error) {
		<-req.Context().Done()
		return nil, req.Context().Err()
	})
	mine := []policy.Policy{}
	in := &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: hang, PerRetryPolicies: mine,
		Retry: policy.RetryOptions{MaxRetries: 1, RetryDelay: time.Millisecond}}}
	opts := ClientOptions(in, 10*time.Millisecond)
	if len(in.PerRetryPolicies) != 0 {
		t.Fatalf("the caller's policies changed: %d", len(in.PerRetryPolicies))
	}
	pl := runtime.NewPipeline("test", "v0", runtime.PipelineOptions{}, &opts.ClientOptions)
	req, err := runtime.NewRequest(context.Background(), http.MethodGet, "https://management.azure.com/subscriptions/s/resourceGroups/g")
	if err != nil {
		t.Fatal(err)
	}
	_, err = pl.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "GET /subscriptions/s/resourceGroups/g: no answer from Azure within the 10ms per-try timeout") {
		t.Fatalf("error %v", err)
	}
}

type transporterFunc func(*http.Request) (*http.Response, error)

func (f transporterFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }
