// Package armsim is a stateful, in-memory simulation of Azure Resource
// Manager resource providers, for tests of code that uses the Azure SDK
// for Go. It sits behind the SDK's own fake servers (the generated
// fake.ServerFactory of each resource manager module, azfake responders):
// a client is built with an arm.ClientOptions whose Transport is
// Sim.Transport, and nothing else tells it that it is not talking to
// ARM.
//
// What it keeps, as ARM does: resources by id (compared
// case-insensitively) with their JSON, tags and provisioningState; PUTs
// and DELETEs as long-running operations that take a number of polls
// (Options.Polls) and pass through Updating or Deleting, advancing on the
// polls of the operation and on GETs of the resource, so that a client
// that forgets its poller (a restarted controller) still sees them end;
// 409 AnotherOperationInProgress for a write during an operation; the
// validation each resource kind registers (Kind.Prepare, CheckDelete),
// answered with ARM's error envelope; injected faults (Inject): 429 with
// Retry-After, 5xx, conflicts, operations that end Failed.
//
// Why the transport answers the polls itself: an azfake.PollerResponder
// replays a script fixed when the operation starts, while ARM's
// operations advance on their own; a client resuming from a resource's
// provisioningState must see the same operation end. So a Begin* fake
// returns only the first, non-terminal response, and the simulation's
// transport answers the fake poller's status URL from its state. Every
// other request (Get, List, Begin*, Delete) goes through the SDK's fake
// server for its method.
//
// Network (load balancers and public IP addresses) is built in (see
// network.go). Other resource types add a Kind with Register (validation,
// what the service fills in, state that moves on by itself with
// Observed), and their fake servers, built with PutLRO, DeleteLRO,
// GetResource and ListPager, either on NetworkServerFactory (for
// Microsoft.Network types) or on their own module's fake.ServerFactory
// given to Mount; child resources need their parent and are deleted with
// it. TestExtension shows the whole of it.
package armsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6/fake"
)

// Provisioning states.
const (
	StateSucceeded = "Succeeded"
	StateUpdating  = "Updating"
	StateDeleting  = "Deleting"
	StateFailed    = "Failed"
)

// Options configure a simulation.
type Options struct {
	// Polls is how many polls an accepted PUT or DELETE takes: each poll
	// of its operation or GET of its resource counts one. 0 ends it
	// within the request, so that the Begin* call returns a finished
	// poller.
	Polls int
	// PageSize is the most resources a list page holds; 0 puts every
	// resource in one page.
	PageSize int
	// DeployReads is, for Front Door resources (see frontdoor.go), how
	// many reads after provisioning succeeded a deploymentStatus stays
	// NotStarted, then as many InProgress, before Succeeded: Front Door
	// deploys to its edge long after ARM provisioned. 0 deploys at once.
	DeployReads int
}

// Kind is what the simulation knows of one resource type.
type Kind struct {
	// Type is the full type, e.g. Microsoft.Network/loadBalancers.
	Type string
	// Prepare validates a PUT of id with body (the request's JSON)
	// against the state seen through v and returns the JSON to store: the
	// request with what the service fills in (child ids, defaults). prev
	// is the stored JSON, nil on a create. An *Error refuses the request.
	// The simulation sets id, name, type, etag and provisioningState
	// itself.
	Prepare func(v *View, id ID, body, prev []byte) ([]byte, error)
	// Settle, when set, is applied to the stored JSON when a PUT's
	// operation succeeds (e.g. to allocate an address).
	Settle func(v *View, id ID, body []byte) []byte
	// Observed, when set, is applied to the stored JSON each time a client
	// reads the resource (a GET, or a poll of its operation), after the
	// operation advanced: for state that moves on by itself, such as
	// Front Door's deploymentStatus long after provisioningState is
	// Succeeded.
	Observed func(v *View, id ID, body []byte) []byte
	// CheckDelete, when set, may refuse a DELETE with an *Error (e.g. a
	// resource that another one uses).
	CheckDelete func(v *View, id ID) error
}

// Sim is one simulated ARM. It is safe for concurrent use.
type Sim struct {
	mu        sync.Mutex
	opts      Options
	kinds     map[string]*Kind // by lowercase type
	resources map[string]*record
	ops       map[string]*operation // by resource key; kept after the end for late polls
	held      map[string]bool       // lowercase types whose operations do not advance; "" all
	heldIDs   map[string]bool       // resource keys whose (and whose children's) operations do not advance
	faults    []*Injected
	calls     []Call
	mounts    map[string]policy.Transporter // by lowercase type prefix (see Mount)
	etag      int
	addresses int

	network *fake.ServerFactory

	// deployReads counts, per Front Door resource key, the reads since
	// its provisioning succeeded (see Options.DeployReads).
	deployReads map[string]int
	// failDeploy are Front Door resource keys whose deployment ends Failed.
	failDeploy map[string]bool
	// deployed is, per Front Door resource key, the deployment status the
	// edge goes by, which the reported one differs from while
	// notStartedReported (see ReportNotStarted).
	deployed map[string]string
	// notStartedReported: reads show deploymentStatus NotStarted whatever
	// the deployment's progress (ReportNotStarted).
	notStartedReported bool
	// noLinkStatus stops Front Door origins' sharedPrivateLinkResource.status
	// following their Private Link connections (MirrorConnectionStatus).
	noLinkStatus bool

	dispatchMu sync.Mutex
	current    string // the path being dispatched, under dispatchMu
}

type record struct {
	id   ID
	body []byte
}

type operation struct {
	delete bool
	polls  int
	fail   *Error
	state  string // InProgress, Succeeded or Failed
	result []byte // the resource when a PUT ended
	api    string
}

// New is an empty simulation with the network resource provider's load
// balancers and public IP addresses registered and mounted.
func New(opts Options) *Sim {
	s := &Sim{opts: opts, kinds: map[string]*Kind{}, resources: map[string]*record{}, ops: map[string]*operation{},
		held: map[string]bool{}, heldIDs: map[string]bool{}, mounts: map[string]policy.Transporter{}, deployReads: map[string]int{}, failDeploy: map[string]bool{},
		deployed: map[string]string{}}
	s.registerNetwork()
	s.registerFrontDoor()
	return s
}

// Register adds (or replaces) a resource kind.
func (s *Sim) Register(k Kind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kinds[strings.ToLower(k.Type)] = &k
}

// Mount routes the requests for resources whose type starts with prefix
// (a provider namespace such as Microsoft.Cdn, or a namespace and type
// such as Microsoft.Network/FrontDoorWebApplicationFirewallPolicies) to
// t, usually a fake.NewServerFactoryTransport; the longest prefix wins.
// Microsoft.Network is mounted by New (see NetworkServerFactory).
func (s *Sim) Mount(prefix string, t policy.Transporter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mounts[strings.ToLower(prefix)] = t
}

// mountFor is the transport of the longest mounted prefix of path's
// type; s.mu held.
func (s *Sim) mountFor(path string) policy.Transporter {
	typ := namespaceOf(path)
	if id, err := ParseID(path); err == nil && id.Namespace != "" {
		typ = id.Type()
	}
	typ = strings.ToLower(typ)
	best, bestLen := policy.Transporter(nil), -1
	for prefix, t := range s.mounts {
		if (typ == prefix || strings.HasPrefix(typ, prefix+"/")) && len(prefix) > bestLen {
			best, bestLen = t, len(prefix)
		}
	}
	return best
}

// SetPolls changes Options.Polls for operations started from now on.
func (s *Sim) SetPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Polls = n
}

// Hold keeps the running and future operations on resources of typ ("" for
// every type) in progress, whatever is polled, until Release: a test can
// then look at a client in the middle of an operation without timing.
func (s *Sim) Hold(typ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[strings.ToLower(typ)] = true
}

// Release lets the operations Hold kept go on.
func (s *Sim) Release(typ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, strings.ToLower(typ))
}

// HoldResource is Hold for the operations on id and its children only:
// one object's operation hangs while others go on.
func (s *Sim) HoldResource(id ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heldIDs[id.Key()] = true
}

// ReleaseResource lets the operations HoldResource kept go on.
func (s *Sim) ReleaseResource(id ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.heldIDs, id.Key())
}

// Resource is a stored resource as a test or a Kind sees it.
type Resource struct {
	ID   ID
	JSON []byte
	// State is properties.provisioningState.
	State string
	// Operation is the running operation: "put", "delete" or "".
	Operation string
}

// View is the state as a Kind's hooks see it, under the simulation's lock.
type View struct{ s *Sim }

// Get is the resource with id, if any.
func (v *View) Get(id ID) (Resource, bool) { return v.s.resource(id) }

// Each calls fn with every resource of typ, in id order.
func (v *View) Each(typ string, fn func(Resource)) {
	for _, r := range v.s.ofType(typ) {
		fn(r)
	}
}

// Get is the stored resource with id, without advancing its operation.
func (s *Sim) Get(id ID) (Resource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resource(id)
}

// Resources are the stored resources of typ, in id order.
func (s *Sim) Resources(typ string) []Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ofType(typ)
}

// Lookup decodes the stored resource with id into T (e.g.
// armnetwork.LoadBalancer).
func Lookup[T any](s *Sim, id ID) (T, bool) {
	var v T
	r, ok := s.Get(id)
	if !ok {
		return v, false
	}
	if err := json.Unmarshal(r.JSON, &v); err != nil {
		panic(fmt.Sprintf("armsim: decoding %s: %v", id, err))
	}
	return v, true
}

// Seed stores v (an SDK model such as armnetwork.LoadBalancer) as an
// existing resource in provisioningState Succeeded, without validation:
// what a test needs to exist before the code under test runs (regional
// load balancers, resources someone else owns).
func (s *Sim) Seed(id ID, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.kinds[strings.ToLower(id.Type())]
	if k != nil && k.Settle != nil {
		b = k.Settle(&View{s}, id, b)
	}
	b, err = s.stamp(id, b, StateSucceeded)
	if err != nil {
		return err
	}
	s.resources[id.Key()] = &record{id: id, body: b}
	return nil
}

// Delete removes a resource at once, as someone outside the code under
// test would.
func (s *Sim) Delete(id ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.resources, id.Key())
	delete(s.ops, id.Key())
}

// Edit changes a stored resource's JSON at once (drift made in the
// portal); fn gets and returns the JSON.
func (s *Sim) Edit(id ID, fn func([]byte) []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.resources[id.Key()]
	if !ok {
		return false
	}
	r.body = fn(r.body)
	return true
}

func (s *Sim) resource(id ID) (Resource, bool) {
	r, ok := s.resources[id.Key()]
	if !ok {
		return Resource{}, false
	}
	res := Resource{ID: r.id, JSON: r.body, State: provisioningState(r.body)}
	if op := s.ops[id.Key()]; op != nil && op.state == "InProgress" {
		res.Operation = "put"
		if op.delete {
			res.Operation = "delete"
		}
	}
	return res, true
}

func (s *Sim) ofType(typ string) []Resource {
	var out []Resource
	for _, r := range s.resources {
		if strings.EqualFold(r.id.Type(), typ) {
			res, _ := s.resource(r.id)
			out = append(out, res)
		}
	}
	slices.SortFunc(out, func(a, b Resource) int { return strings.Compare(a.ID.Key(), b.ID.Key()) })
	return out
}

func (s *Sim) isHeld(id ID) bool {
	if s.held[""] || s.held[strings.ToLower(id.Type())] {
		return true
	}
	for k := range s.heldIDs {
		if id.Key() == k || strings.HasPrefix(id.Key(), k+"/") {
			return true
		}
	}
	return false
}

// advance counts one poll of the operation on id, and ends it when its
// polls are spent.
func (s *Sim) advance(id ID) {
	op := s.ops[id.Key()]
	if op == nil || op.state != "InProgress" || s.isHeld(id) {
		return
	}
	op.polls--
	if op.polls <= 0 {
		s.finish(id, op)
	}
}

// observed applies the kind's Observed hook to a resource a client reads.
func (s *Sim) observed(id ID) {
	r := s.resources[id.Key()]
	if r == nil {
		return
	}
	if k := s.kinds[strings.ToLower(id.Type())]; k != nil && k.Observed != nil {
		r.body = k.Observed(&View{s}, id, r.body)
	}
}

func (s *Sim) finish(id ID, op *operation) {
	r := s.resources[id.Key()]
	switch {
	case op.fail != nil:
		op.state = StateFailed
		if r != nil {
			r.body, _ = setState(r.body, StateFailed)
		}
	case op.delete:
		op.state = StateSucceeded
		// ARM deletes a resource's child resources with it.
		for key := range s.resources {
			if key == id.Key() || strings.HasPrefix(key, id.Key()+"/") {
				delete(s.resources, key)
			}
		}
	default:
		op.state = StateSucceeded
		if r == nil {
			return
		}
		if k := s.kinds[strings.ToLower(id.Type())]; k != nil && k.Settle != nil {
			r.body = k.Settle(&View{s}, id, r.body)
		}
		r.body, _ = setState(r.body, StateSucceeded)
		op.result = r.body
	}
}

// Put runs a PUT of id with body (JSON) as the fake server of a Begin*
// method receives it: it returns the stored JSON and whether the
// operation already ended (Options.Polls 0), or an *Error. ctx is the
// request's (it carries the SDK method's name, which faults match).
func (s *Sim) Put(ctx context.Context, id ID, body []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.put(ctx, id, body, s.opts.Polls)
}

// PutSync is Put for a synchronous create (e.g. a Front Door rule set's
// Create, which is not a long-running operation): it ends within the
// request.
func (s *Sim) PutSync(ctx context.Context, id ID, body []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _, err := s.put(ctx, id, body, 0)
	return b, err
}

func (s *Sim) put(ctx context.Context, id ID, body []byte, polls int) ([]byte, bool, error) {
	k := s.kinds[strings.ToLower(id.Type())]
	if k == nil {
		return nil, false, &Error{Status: http.StatusBadRequest, Code: "InvalidResourceType",
			Message: fmt.Sprintf("The resource type '%s' could not be found in the namespace '%s'.", strings.Join(id.Types, "/"), id.Namespace)}
	}
	if parent, ok := id.Parent(); ok {
		if _, ok := s.resources[parent.Key()]; !ok {
			return nil, false, &Error{Status: http.StatusNotFound, Code: "ParentResourceNotFound",
				Message: fmt.Sprintf("Can not perform requested operation on nested resource. Parent resource '%s' not found.", parent.Name())}
		}
	}
	if op := s.ops[id.Key()]; op != nil && op.state == "InProgress" {
		return nil, false, AnotherOperationInProgress(id)
	}
	if err := checkTags(body); err != nil {
		return nil, false, err
	}
	var prev []byte
	if r, ok := s.resources[id.Key()]; ok {
		prev = r.body
	}
	stored, err := k.Prepare(&View{s}, id, body, prev)
	if err != nil {
		return nil, false, err
	}
	if stored, err = s.stamp(id, stored, StateUpdating); err != nil {
		return nil, false, err
	}
	s.resources[id.Key()] = &record{id: id, body: stored}
	op := &operation{polls: polls, state: "InProgress", api: apiName(ctx)}
	if op.fail = s.operationFault(op.api, http.MethodPut, id); op.fail != nil {
		op.polls = max(op.polls, 1) // ARM reports a failed operation through its status
	}
	s.ops[id.Key()] = op
	if op.polls <= 0 && !s.isHeld(id) {
		s.finish(id, op)
		return op.result, true, nil
	}
	return stored, false, nil
}

// Remove runs a DELETE of id as the fake server of a BeginDelete method
// receives it: whether the operation already ended, or an *Error.
// Deleting what does not exist succeeds at once, as ARM answers 204.
func (s *Sim) Remove(ctx context.Context, id ID) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.resources[id.Key()]
	if !ok {
		return true, nil
	}
	if op := s.ops[id.Key()]; op != nil && op.state == "InProgress" {
		if op.delete {
			return false, nil // ARM answers a repeated DELETE with the running operation
		}
		return false, AnotherOperationInProgress(id)
	}
	if k := s.kinds[strings.ToLower(id.Type())]; k != nil && k.CheckDelete != nil {
		if err := k.CheckDelete(&View{s}, id); err != nil {
			return false, err
		}
	}
	r.body, _ = setState(r.body, StateDeleting)
	op := &operation{delete: true, polls: s.opts.Polls, state: "InProgress", api: apiName(ctx)}
	if op.fail = s.operationFault(op.api, http.MethodDelete, id); op.fail != nil {
		op.polls = max(op.polls, 1)
	}
	s.ops[id.Key()] = op
	if op.polls <= 0 && !s.isHeld(id) {
		s.finish(id, op)
		return true, nil
	}
	return false, nil
}

// Read runs a GET of id: the stored JSON (after counting the GET as a
// poll of a running operation), or a 404 *Error.
func (s *Sim) Read(id ID) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(id)
	s.observed(id)
	r, ok := s.resources[id.Key()]
	if !ok {
		return nil, NotFound(id)
	}
	return r.body, nil
}

// ListJSON is what a list of typ in the scope of parent returns: every
// resource of that type in parent's resource group (parent a resource
// group id) or under parent (a resource, for child types), in name order.
func (s *Sim) ListJSON(parent ID, typ string) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rs []*record
	for _, r := range s.resources {
		if !strings.EqualFold(r.id.Type(), typ) || !strings.EqualFold(r.id.Subscription, parent.Subscription) ||
			!strings.EqualFold(r.id.ResourceGroup, parent.ResourceGroup) {
			continue
		}
		if p, ok := r.id.Parent(); ok && p.Key() != parent.Key() {
			continue
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *record) int { return strings.Compare(a.id.Key(), b.id.Key()) })
	out := make([][]byte, len(rs))
	for i, r := range rs {
		s.observed(r.id) // a list reads each resource as a GET does
		out[i] = r.body
	}
	return out
}

// pageSize is Options.PageSize.
func (s *Sim) pageSize() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.PageSize
}

// poll answers a poll of the operation on id, as the fake poller expects:
// Fake-Poller-Status InProgress, Succeeded (with the resource) or Failed
// (with the error, as ARM's operation status carries it).
func (s *Sim) poll(req *http.Request, id ID) *http.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.ops[id.Key()]
	if op == nil {
		return NotFound(id).response(req)
	}
	s.advance(id)
	s.observed(id)
	h := http.Header{}
	h.Set("Fake-Poller-Status", op.state)
	switch op.state {
	case "InProgress":
		return jsonResponse(req, http.StatusOK, h, []byte(`{"status":"InProgress"}`))
	case StateFailed:
		b, _ := json.Marshal(map[string]any{"status": StateFailed, "error": map[string]any{"code": op.fail.Code, "message": op.fail.Message}})
		return jsonResponse(req, http.StatusOK, h, b)
	}
	if op.delete {
		return jsonResponse(req, http.StatusNoContent, h, nil)
	}
	return jsonResponse(req, http.StatusOK, h, op.result)
}

// stamp sets what ARM sets on every resource it stores.
func (s *Sim) stamp(id ID, body []byte, state string) ([]byte, error) {
	m, err := decodeMap(body)
	if err != nil {
		return nil, &Error{Status: http.StatusBadRequest, Code: "InvalidRequestFormat", Message: "Cannot parse the request: " + err.Error()}
	}
	s.etag++
	m["id"], m["name"], m["type"] = id.String(), id.Name(), id.Type()
	m["etag"] = fmt.Sprintf(`W/"%08d-0000-0000-0000-000000000000"`, s.etag)
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		m["properties"] = props
	}
	props["provisioningState"] = state
	return json.Marshal(m)
}

func setState(body []byte, state string) ([]byte, error) {
	m, err := decodeMap(body)
	if err != nil {
		return body, err
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		m["properties"] = props
	}
	props["provisioningState"] = state
	return json.Marshal(m)
}

func provisioningState(body []byte) string {
	var v struct {
		Properties struct {
			ProvisioningState string `json:"provisioningState"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Properties.ProvisioningState
}

func decodeMap(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	m := map[string]any{}
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// checkTags applies ARM's rules for tags: at most 50, names up to 512
// characters without <>%&\?/, values up to 256.
func checkTags(body []byte) error {
	var v struct {
		Tags map[string]*string `json:"tags"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "InvalidRequestFormat", Message: "Cannot parse the request: " + err.Error()}
	}
	if len(v.Tags) > 50 {
		return &Error{Status: http.StatusBadRequest, Code: "InvalidTagCount", Message: "The number of tags exceeds the limit of 50."}
	}
	for name, value := range v.Tags {
		if strings.ContainsAny(name, `<>%&\?/`) {
			return InvalidTagNameCharacters(name)
		}
		if len(name) > 512 {
			return &Error{Status: http.StatusBadRequest, Code: "InvalidTagNameLength", Message: fmt.Sprintf("The tag name '%s' exceeds the maximum length of 512 characters.", name)}
		}
		if value != nil && len(*value) > 256 {
			return &Error{Status: http.StatusBadRequest, Code: "InvalidTagValueLength", Message: fmt.Sprintf("The value of tag '%s' exceeds the maximum length of 256 characters.", name)}
		}
	}
	return nil
}
