// Package armutil holds the small helpers fleetnet's Azure code needs on
// Azure Resource Manager values, once: reading the SDK's optional fields
// (Deref), the tags by which a provider recognises and keeps what it owns
// (Owner, TagDiff, WithTags, MaxTagValue), what a provisioningState says
// (Running) and the ARM clients' retry defaults and per-try timeout
// (ClientOptions). Error
// responses have their own package, armerr.
package armutil

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// MaxTagValue is how many characters an Azure tag value holds at most.
const MaxTagValue = 256

// Deref is *p, the zero value when p is nil (the SDK's models hold every
// field as a pointer).
func Deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// Owner recognises by their tags the resources one provider instance owns
// (one per fleet sharing a resource group) and the object each serves:
// Tag holds Value, NamespaceTag and NameTag the object's namespace and
// name (a tag each: tag names cannot hold '/', and a namespace/name can
// be longer than a tag value).
type Owner struct {
	Tag, Value            string
	NamespaceTag, NameTag string
}

// Key is the object ("namespace/name") of a resource o owns, "" for any
// other: such a resource is never changed or deleted.
func (o Owner) Key(tags map[string]*string) string {
	ns, name := Deref(tags[o.NamespaceTag]), Deref(tags[o.NameTag])
	if tags == nil || Deref(tags[o.Tag]) != o.Value || ns == "" || name == "" {
		return ""
	}
	return ns + "/" + name
}

// TagDiff says which of want's tags got lacks or has otherwise, as
// "tag <name>", sorted.
func TagDiff(want, got map[string]*string) []string {
	var d []string
	for k, v := range want {
		if g, ok := got[k]; !ok || Deref(g) != Deref(v) {
			d = append(d, "tag "+k)
		}
	}
	slices.Sort(d)
	return d
}

// WithTags is want with the tags got has besides the provider's, so that
// an update keeps tags someone added.
func WithTags(want, got map[string]*string) map[string]*string {
	out := map[string]*string{}
	for k, v := range got {
		out[k] = v
	}
	for k, v := range want {
		out[k] = v
	}
	return out
}

// Running says whether a provisioningState is that of an operation in
// progress (someone's write or delete): the resource is waited for, not
// written.
func Running(provisioningState string) bool {
	switch provisioningState {
	case "Creating", "Updating", "Deleting", "Accepted":
		return true
	}
	return false
}

// Retry defaults of ClientOptions: ARM's Retry-After on throttling is
// often tens of seconds.
const (
	DefaultMaxRetries    = 5
	DefaultMaxRetryDelay = 2 * time.Minute
)

// DefaultTryTimeout bounds each try of an ARM request when the caller
// sets none. ARM answers a request within seconds (a long-running
// operation answers 201 or 202 at once and is then polled, each poll a
// request of its own), so a try unanswered for 30s is a connection that
// hangs; azcore's retry policy tries again. Without it a hung request
// would never reach a provider's wait bound.
const DefaultTryTimeout = 30 * time.Second

// ClientOptions is a copy of o (the zero options, Azure's public cloud,
// for nil) whose zero Retry gets DefaultMaxRetries and
// DefaultMaxRetryDelay, so that azcore's retry policy honours ARM's
// Retry-After on throttling; whose Retry.TryTimeout is tryTimeout, else
// o's, else DefaultTryTimeout; and with perTry run on every try, after
// the policy that names the request and the bound in the error of a try
// left unanswered (which wraps context.DeadlineExceeded).
func ClientOptions(o *arm.ClientOptions, tryTimeout time.Duration, perTry ...policy.Policy) arm.ClientOptions {
	opts := arm.ClientOptions{}
	if o != nil {
		opts = *o
	}
	if opts.Retry.MaxRetries == 0 && opts.Retry.MaxRetryDelay == 0 && opts.Retry.RetryDelay == 0 {
		opts.Retry.MaxRetries, opts.Retry.MaxRetryDelay = DefaultMaxRetries, DefaultMaxRetryDelay
	}
	switch {
	case tryTimeout > 0:
		opts.Retry.TryTimeout = tryTimeout
	case opts.Retry.TryTimeout <= 0:
		opts.Retry.TryTimeout = DefaultTryTimeout
	}
	// a copy: the caller's slice is not appended to
	opts.PerRetryPolicies = append(append(slices.Clone(opts.PerRetryPolicies), unanswered{opts.Retry.TryTimeout}), perTry...)
	return opts
}

// unanswered says, of a try that ended because its timeout passed, which
// request went unanswered and for how long.
type unanswered struct{ after time.Duration }

func (u unanswered) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if err != nil && errors.Is(req.Raw().Context().Err(), context.DeadlineExceeded) {
		r := req.Raw()
		return resp, fmt.Errorf("%s %s: no answer from Azure within the %s per-try timeout: %w", r.Method, r.URL.Path, u.after, err)
	}
	return resp, err
}

// Observation is one try of an ARM request as the client saw it.
type Observation struct {
	// Operation is the SDK method that sent it, e.g.
	// RoutesClient.BeginCreate ("" when the SDK did not say).
	Operation string
	// Status is the HTTP status; 0 when there was no answer.
	Status int
	// Unanswered: the try's timeout passed without an answer.
	Unanswered bool
	// RetryAfter is what a 429 asked to wait (Retry-After, or the
	// retry-after-ms ARM sends below a second); 0 when it did not say.
	RetryAfter time.Duration
}

// Observe is a per-try policy (for ClientOptions' perTry) that hands f
// every try's outcome, after the try ends.
func Observe(f func(Observation)) policy.Policy { return observe(f) }

type observe func(Observation)

func (f observe) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	o := Observation{}
	o.Operation, _ = req.Raw().Context().Value(runtime.CtxAPINameKey{}).(string)
	if resp != nil {
		o.Status = resp.StatusCode
		if o.Status == http.StatusTooManyRequests {
			o.RetryAfter = RetryAfter(resp.Header)
		}
	}
	o.Unanswered = err != nil && errors.Is(req.Raw().Context().Err(), context.DeadlineExceeded)
	f(o)
	return resp, err
}

// RetryAfter is how long a response's headers ask to wait:
// retry-after-ms or x-ms-retry-after-ms (milliseconds), else Retry-After
// (seconds, or an HTTP date); 0 when they do not say.
func RetryAfter(h http.Header) time.Duration {
	for _, k := range []string{"retry-after-ms", "x-ms-retry-after-ms"} {
		if ms, err := strconv.ParseInt(h.Get(k), 10, 64); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
