package armsim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// Call is one request the simulation received.
type Call struct {
	// API is the SDK method, e.g. LoadBalancersClient.BeginCreateOrUpdate
	// (a poll carries its Begin* method's name).
	API    string
	Method string
	// ID is the resource (or collection) path, without the fake poller's
	// or pager's suffix.
	ID string
	// Poll is a poll of a long-running operation.
	Poll bool
	// Status is the HTTP status answered, 0 for a transport error.
	Status int
	// Fault is true when an injected fault answered.
	Fault bool
}

// Write is true for a PUT, PATCH, POST or DELETE that is not a poll.
func (c Call) Write() bool {
	return !c.Poll && c.Method != http.MethodGet && c.Method != http.MethodHead
}

func (c Call) String() string {
	poll := ""
	if c.Poll {
		poll = " (poll)"
	}
	return fmt.Sprintf("%s %s %s%s -> %d", c.API, c.Method, c.ID, poll, c.Status)
}

// Calls are the requests received so far, in order.
func (s *Sim) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Writes are the write requests received so far (Call.Write), in order,
// those answered by faults included.
func (s *Sim) Writes() []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Write() {
			out = append(out, c)
		}
	}
	return out
}

// Fault is an injected failure. A request matches when every set field
// matches.
type Fault struct {
	// API is the SDK method (e.g. PublicIPAddressesClient.NewListPager).
	API string
	// Method is the HTTP method.
	Method string
	// ID matches requests whose resource path contains it
	// (case-insensitively).
	ID string
	// Polls: only the polls of an operation match (with API its Begin*
	// method); otherwise polls never match.
	Polls bool
	// Times is how many requests it answers; 0 is every one until
	// Remove.
	Times int
	// Err is the response: Throttled, InternalServerError,
	// AnotherOperationInProgress or any *Error.
	Err *Error
	// FailOperation: the request is accepted, and its operation ends
	// Failed with Err (Code and Message) instead of answering Err.
	FailOperation bool
	// Hang: the request is never answered (Err is not used). The
	// transport holds it until its context ends, the client's per-try
	// timeout (azcore policy.RetryOptions.TryTimeout) or cancellation,
	// and returns the context's error, as a connection to ARM that stays
	// open without an answer would. ARM documents no such case; a
	// client must bound every request on its own.
	Hang bool
}

// Injected is a fault in place.
type Injected struct {
	f     Fault
	fired int
	done  bool
	s     *Sim
}

// Inject puts f in place until Remove or its Times are spent.
func (s *Sim) Inject(f Fault) *Injected {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := &Injected{f: f, s: s}
	s.faults = append(s.faults, in)
	return in
}

// Remove takes the fault away.
func (in *Injected) Remove() {
	in.s.mu.Lock()
	defer in.s.mu.Unlock()
	in.done = true
}

// Fired is how many requests the fault answered.
func (in *Injected) Fired() int {
	in.s.mu.Lock()
	defer in.s.mu.Unlock()
	return in.fired
}

func (in *Injected) matches(api, method string, id string, poll bool) bool {
	f := in.f
	return !in.done && (f.API == "" || f.API == api) && (f.Method == "" || strings.EqualFold(f.Method, method)) &&
		(f.ID == "" || strings.Contains(strings.ToLower(id), strings.ToLower(f.ID))) && f.Polls == poll
}

func (in *Injected) fire() {
	in.fired++
	if in.f.Times > 0 && in.fired >= in.f.Times {
		in.done = true
	}
}

// requestFault is the fault answering a request, nil for none; s.mu held.
func (s *Sim) requestFault(api, method, id string, poll bool) *Fault {
	for _, in := range s.faults {
		if !in.f.FailOperation && in.matches(api, method, id, poll) {
			in.fire()
			f := in.f
			return &f
		}
	}
	return nil
}

// operationFault is the failure an accepted operation ends with, nil for
// none; s.mu held.
func (s *Sim) operationFault(api, method string, id ID) *Error {
	for _, in := range s.faults {
		if in.f.FailOperation && in.matches(api, method, id.String(), false) {
			in.fire()
			return in.f.Err
		}
	}
	return nil
}

// Transport is the policy.Transporter to put in arm.ClientOptions: it
// answers injected faults and operation polls, and hands every other
// request to the fake server mounted for its provider namespace, turning
// an *Error the fake returns into ARM's HTTP response.
func (s *Sim) Transport() policy.Transporter { return transport{s} }

type transport struct{ s *Sim }

const pollSuffix = "/get/fake/status"

var pageSuffix = regexp.MustCompile(`/fake_page_\d+$`)

func (t transport) Do(req *http.Request) (*http.Response, error) {
	s := t.s
	api := apiName(req.Context())
	path := pageSuffix.ReplaceAllString(req.URL.Path, "")
	poll := strings.HasSuffix(path, pollSuffix)
	path = strings.TrimSuffix(path, pollSuffix)
	call := Call{API: api, Method: req.Method, ID: path, Poll: poll}

	s.mu.Lock()
	fault := s.requestFault(api, req.Method, path, poll)
	inner := s.mountFor(path)
	s.mu.Unlock()

	var resp *http.Response
	var err error
	switch {
	case fault != nil && fault.Hang:
		<-req.Context().Done()
		call.Fault, err = true, req.Context().Err()
	case fault != nil:
		resp, call.Fault = fault.Err.response(req), true
	case poll:
		id, perr := ParseID(path)
		if perr != nil {
			return nil, perr
		}
		resp = s.poll(req, id)
	case inner == nil:
		resp = (&Error{Status: http.StatusNotFound, Code: "NoRegisteredProviderFound",
			Message: fmt.Sprintf("No registered resource provider found for path %s.", path)}).response(req)
	default:
		resp, err = s.dispatch(inner, req, path)
		var ae *Error
		if errors.As(err, &ae) {
			resp, err = ae.response(req), nil
		}
	}
	if resp != nil {
		call.Status = resp.StatusCode
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	return resp, err
}

// dispatch hands req to a fake server. Dispatches are serialized, which
// costs nothing in memory and lets the fake's methods know the whole
// request path (RequestID): some get only the resource group and name,
// and a list gets no context at all.
func (s *Sim) dispatch(inner policy.Transporter, req *http.Request, path string) (*http.Response, error) {
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	s.current = path
	defer func() { s.current = "" }()
	return inner.Do(req)
}

// RequestID is the resource (or, for a list, collection) id of the
// request being dispatched; only a fake server's method, which runs
// within the dispatch, may call it.
func (s *Sim) RequestID() ID {
	id, err := ParseID(s.current)
	if err != nil {
		panic(fmt.Sprintf("armsim: RequestID outside a dispatch or of a path it cannot parse: %v", err))
	}
	return id
}

func apiName(ctx context.Context) string {
	api, _ := ctx.Value(runtime.CtxAPINameKey{}).(string)
	return api
}

func namespaceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if strings.EqualFold(p, "providers") && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}
