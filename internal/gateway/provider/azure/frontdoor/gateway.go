package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armerr"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"

	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/deployloop"
)

// entry is one observed resource.
type entry struct {
	path []string
	v    any
}

// observed is a profile and its children as Azure has them.
type observed struct {
	profile any // nil when there is none
	res     map[string]map[string]entry
}

func pathKey(path []string) string { return strings.ToLower(strings.Join(path, "/")) }

func (o *observed) get(kind string, path []string) any {
	if e, ok := o.res[kind][pathKey(path)]; ok {
		return e.v
	}
	return nil
}

func (o *observed) add(kind string, path []string, v any) {
	if o.res[kind] == nil {
		o.res[kind] = map[string]entry{}
	}
	o.res[kind][pathKey(path)] = entry{path: path, v: v}
}

// sorted are the entries of kind in path order.
func (o *observed) sorted(kind string) []entry {
	var out []entry
	for _, k := range slices.Sorted(maps.Keys(o.res[kind])) {
		out = append(out, o.res[kind][k])
	}
	return out
}

// observe reads the profile and every child of it; any error fails it as
// a whole, so that nothing is decided on part of the state.
func (p *Provider) observe(ctx context.Context, profile string) (*observed, error) {
	o := &observed{res: map[string]map[string]entry{}}
	v, err := p.kinds[kindProfile].get(ctx, []string{profile})
	if armerr.IsNotFound(err) {
		return o, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Front Door profile %s: %w", profile, armerr.Describe(err))
	}
	o.profile = v
	o.add(kindProfile, []string{profile}, v)
	list := func(kind string, parent []string) ([]entry, error) {
		vs, err := p.kinds[kind].list(ctx, parent)
		if err != nil {
			return nil, fmt.Errorf("listing the %ss of %s: %w", kind, strings.Join(parent, "/"), armerr.Describe(err))
		}
		var out []entry
		for _, v := range vs {
			path := append(slices.Clone(parent), metaOf(v).Name)
			o.add(kind, path, v)
			out = append(out, entry{path: path, v: v})
		}
		return out, nil
	}
	top := []string{profile}
	var errs []error
	eps, err := list(kindEndpoint, top)
	errs = append(errs, err)
	for _, e := range eps {
		_, err := list(kindRoute, e.path)
		errs = append(errs, err)
	}
	_, err = list(kindSecret, top)
	errs = append(errs, err)
	_, err = list(kindDomain, top)
	errs = append(errs, err)
	groups, err := list(kindOriginGroup, top)
	errs = append(errs, err)
	for _, g := range groups {
		_, err := list(kindOrigin, g.path)
		errs = append(errs, err)
	}
	sets, err := list(kindRuleSet, top)
	errs = append(errs, err)
	for _, s := range sets {
		_, err := list(kindRule, s.path)
		errs = append(errs, err)
	}
	_, err = list(kindSecurity, top)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// item is one resource of a graph.
type item struct {
	kind  string
	path  []string
	label string
	want  any
}

func (it item) String() string {
	name := it.path[len(it.path)-1]
	if it.label != "" && it.label != name {
		return fmt.Sprintf("%s %s (%s)", it.kind, name, it.label)
	}
	return it.kind + " " + name
}

// short names it for a message: by what it serves when it says (a
// hostname, a cluster, an HTTPRoute rule), else by its name.
func (it item) short() string {
	if it.label != "" && it.kind != kindProfile {
		return it.kind + " " + it.label
	}
	return it.kind + " " + it.path[len(it.path)-1]
}

// items are g's resources in creation order.
func (g graph) items() []item {
	prof := g.profileName
	out := []item{{kind: kindProfile, path: []string{prof}, label: string(g.settings.SKU), want: &g.profile}}
	out = append(out, item{kind: kindEndpoint, path: []string{prof, g.endpoint.name}, want: &g.endpoint.v})
	for i := range g.secrets {
		sc := &g.secrets[i]
		out = append(out, item{kind: kindSecret, path: []string{prof, sc.name}, label: sc.label, want: &sc.v})
	}
	for i := range g.domains {
		d := &g.domains[i]
		out = append(out, item{kind: kindDomain, path: []string{prof, d.name}, label: d.label, want: &d.v})
	}
	for i := range g.groups {
		og := &g.groups[i]
		out = append(out, item{kind: kindOriginGroup, path: []string{prof, og.name}, label: og.label, want: &og.v})
		for j := range og.origins {
			o := &og.origins[j]
			out = append(out, item{kind: kindOrigin, path: []string{prof, og.name, o.name}, label: o.label, want: &o.v})
		}
	}
	for _, rs := range g.ruleSets {
		out = append(out, item{kind: kindRuleSet, path: []string{prof, rs.name}, want: &armcdn.RuleSet{}})
		for j := range rs.rules {
			r := &rs.rules[j]
			out = append(out, item{kind: kindRule, path: []string{prof, rs.name, r.name}, want: &r.v})
		}
	}
	for i := range g.routes {
		r := &g.routes[i]
		out = append(out, item{kind: kindRoute, path: []string{prof, g.endpoint.name, r.name}, label: r.label, want: &r.v})
	}
	if g.security != nil {
		out = append(out, item{kind: kindSecurity, path: []string{prof, g.security.name}, label: g.security.label, want: &g.security.v})
	}
	return out
}

// ours: a child of kind the provider created, known by its name (children
// carry no tags): "fn-..." (rule sets "fn" and ten hex digits, rules "fnr"
// and digits, as Front Door allows no hyphen there).
func ours(kind, name string) bool {
	switch kind {
	case kindRuleSet:
		return ruleSetName.MatchString(name)
	case kindRule:
		return ruleName.MatchString(name)
	}
	return strings.HasPrefix(strings.ToLower(name), namePrefix)
}

var (
	ruleSetName = regexp.MustCompile(`^fn[0-9a-f]{10}$`)
	ruleName    = regexp.MustCompile(`^fnr[0-9]+$`)
)

// deployGateway makes Azure match gw's graph: it plans the graph, writes
// it over what Azure has (graphWrite), withdraws gw's profiles of other
// names (held, left by an older naming), and assesses what Azure then
// has.
func (p *Provider) deployGateway(ctx context.Context, gw edgev1.Gateway, held []string) error {
	key := gw.Namespace + "/" + gw.Name
	s, err := p.settingsOf(gw)
	if err != nil {
		return p.fail(key, fmt.Errorf("not accepted: %w", err))
	}
	p.resume(ctx, key)
	origins := p.resolveOrigins(ctx, gw, s)
	g := planFor(p.target, gw, s, origins)
	obs, err := p.observe(ctx, g.profileName)
	if err != nil {
		return p.fail(key, fmt.Errorf("nothing changed: %w", err))
	}
	if err := p.refuseProfile(key, g, obs); err != nil {
		return p.fail(key, err)
	}
	// Fail static: when a cluster's origin could not be read, what is
	// planned lacks it for want of knowledge, so nothing is removed.
	removals := true
	if unknown := unknownOrigins(origins); len(unknown) > 0 {
		p.log.Info("not withdrawing anything: origins could not be read", "gateway", key, "frontends", unknown)
		removals = false
	}
	w := p.newGraphWrite(key, g, obs)
	if err := w.checkLimits(g.profileName, s.SKU); err != nil && !p.skipLimits {
		return p.fail(key, err)
	}
	if err := w.run(ctx, removals); err != nil {
		return p.fail(key, err)
	}
	for _, old := range held {
		if !strings.EqualFold(old, g.profileName) {
			if err := p.withdrawProfile(ctx, key, old); err != nil {
				return p.fail(key, err)
			}
		}
	}
	if obs, err = p.observe(ctx, g.profileName); err != nil {
		return p.fail(key, err)
	}
	if err := p.approve(ctx, key, g, obs); err != nil {
		return p.fail(key, err)
	}
	p.assess(key, g, obs)
	return nil
}

// refuseProfile says why the Gateway's profile as Azure has it (if any)
// is not written: it is not the provider's for this Gateway, or of
// another tier than g's.
func (p *Provider) refuseProfile(key string, g graph, obs *observed) error {
	if obs.profile != nil && p.owner.Key(metaOf(obs.profile).Tags) != key {
		return fmt.Errorf("the Front Door profile %s exists without fleetnet's tags for this Gateway (owner %s): it is not touched", g.profileName, p.cfg.Owner)
	}
	if prof, ok := obs.profile.(*armcdn.Profile); ok && prof.SKU != nil && armutil.Deref(prof.SKU.Name) != armutil.Deref(g.profile.SKU.Name) {
		// Front Door changes a profile's tier only by an upgrade
		// (Standard to Premium, mapping WAF policies), never back.
		return fmt.Errorf("the Front Door profile %s is %s and the Gateway asks for %s: a profile's tier cannot be changed by writing it; fleetnet does not upgrade profiles (az afd profile upgrade), so upgrade it, or delete the Gateway and create it again",
			g.profileName, armutil.Deref(prof.SKU.Name), armutil.Deref(g.profile.SKU.Name))
	}
	return nil
}

// unknownOrigins are the origin references whose origin could not be
// read (Origin.Unknown), sorted.
func unknownOrigins(origins map[string]Origin) []string {
	var unknown []string
	for ref, o := range origins {
		if o.Unknown {
			unknown = append(unknown, ref)
		}
	}
	slices.Sort(unknown)
	return unknown
}

// owns says whether the provider created e, a resource of kind in the
// profile of Gateway key: an endpoint by its tags, a child by its name
// (see ours).
func (p *Provider) owns(key, kind string, e entry) bool {
	if kind == kindEndpoint {
		return p.owner.Key(metaOf(e.v).Tags) == key
	}
	return ours(kind, e.path[len(e.path)-1])
}

// resourceKey identifies a resource of kind at path within one write.
func resourceKey(kind string, path []string) string { return kind + "\x00" + pathKey(path) }

// graphWrite writes one Gateway's graph over what Azure has (obs): it
// applies the planned items, and removes the resources the provider owns
// in the profile that the graph no longer plans.
type graphWrite struct {
	p     *Provider
	key   string
	items []item
	obs   *observed
	// wanted are the planned resources (resourceKey).
	wanted map[string]bool
	// taken are the domains and patterns of the planned routes
	// (domain+"\x00"+pattern).
	taken map[string]bool
	// removed are the resources this write deleted (resourceKey).
	removed map[string]bool
}

func (p *Provider) newGraphWrite(key string, g graph, obs *observed) *graphWrite {
	w := &graphWrite{p: p, key: key, items: g.items(), obs: obs, wanted: map[string]bool{}, taken: map[string]bool{}, removed: map[string]bool{}}
	for _, it := range w.items {
		w.wanted[resourceKey(it.kind, it.path)] = true
	}
	for _, r := range g.routes {
		for _, d := range routeDomains(&r.v) {
			for _, pat := range r.v.Properties.PatternsToMatch {
				w.taken[d+"\x00"+strings.ToLower(armutil.Deref(pat))] = true
			}
		}
	}
	return w
}

// run writes in dependency order: the routes' dependencies, then the
// routes and security policy, then removes what nothing references any
// more (withdrawOrder: security policies and routes before the rule sets,
// origin groups and custom domains they reference; origins before their
// group). A leaving route whose domain and pattern a planned route takes
// goes before that route is written (Front Door refuses two routes on
// the same domain and pattern); the other leaving routes go after the
// new ones serve (fail static). Without removals, nothing is removed.
func (w *graphWrite) run(ctx context.Context, removals bool) error {
	if err := w.apply(ctx, kindProfile, kindEndpoint, kindSecret, kindDomain, kindOriginGroup, kindOrigin, kindRuleSet, kindRule); err != nil {
		return err
	}
	if removals {
		if err := w.remove(ctx, w.blocking, kindRoute); err != nil {
			return err
		}
	}
	if err := w.apply(ctx, kindRoute, kindSecurity); err != nil {
		return err
	}
	if removals {
		return w.remove(ctx, nil, withdrawOrder...)
	}
	return nil
}

// apply writes the planned items of kinds, in creation order.
func (w *graphWrite) apply(ctx context.Context, kinds ...string) error {
	for _, it := range w.items {
		if slices.Contains(kinds, it.kind) {
			if err := w.p.apply(ctx, w.key, it, w.obs.get(it.kind, it.path)); err != nil {
				return err
			}
		}
	}
	return nil
}

// remove deletes, kind by kind, the unwanted resources (those only
// selects, when set) not removed yet.
func (w *graphWrite) remove(ctx context.Context, only func(entry) bool, kinds ...string) error {
	for _, kind := range kinds {
		for _, e := range w.unwanted(kind) {
			rk := resourceKey(kind, e.path)
			if (only != nil && !only(e)) || w.removed[rk] {
				continue
			}
			if err := w.p.remove(ctx, w.key, kind, e.path, e.v); err != nil {
				return err
			}
			w.removed[rk] = true
		}
	}
	return nil
}

// unwanted are the resources of kind that Azure has, the provider owns
// and the graph does not plan, in path order.
func (w *graphWrite) unwanted(kind string) []entry {
	var out []entry
	for _, e := range w.obs.sorted(kind) {
		if !w.wanted[resourceKey(kind, e.path)] && w.p.owns(w.key, kind, e) {
			out = append(out, e)
		}
	}
	return out
}

// blocking says whether e is a route serving a domain and pattern that a
// planned route takes.
func (w *graphWrite) blocking(e entry) bool {
	r, _ := e.v.(*armcdn.Route)
	if r == nil || r.Properties == nil {
		return false
	}
	for _, d := range routeDomains(r) {
		for _, pat := range r.Properties.PatternsToMatch {
			if w.taken[d+"\x00"+strings.ToLower(armutil.Deref(pat))] {
				return true
			}
		}
	}
	return false
}

// retry runs f, waiting with backoff while Azure answers 409 (another
// operation in progress) or 429 (throttled beyond azcore's retries).
func (p *Provider) retry(ctx context.Context, key, what string, f func() error) error {
	delay := p.cfg.PollInterval
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !armerr.Transient(err) || attempt >= 6 || ctx.Err() != nil {
			return err
		}
		p.log.Info("waiting for Azure", "gateway", key, "resource", what, "status", armerr.Status(err), "attempt", attempt, "retryIn", delay, "cause", armerr.Describe(err))
		p.setMessage(key, fmt.Sprintf("waiting to write %s: %s (attempt %d, again in %s)", what, armerr.Describe(err), attempt, delay))
		if err := deployloop.Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 8*p.cfg.PollInterval)
	}
}

// opTrack keeps the resume token of key's operation op and tells, past
// Config.WaitBound, that what (e.g. "creating route x") runs long.
func (p *Provider) opTrack(ctx context.Context, key, op, what string) *opTrack {
	return &opTrack{
		started: func(tok string) { p.track(ctx, key, op, tok) },
		running: func(elapsed time.Duration) { p.runsLong(key, what, elapsed) },
	}
}

// runsLong tells, once a wait is past Config.WaitBound, that key waits
// for what and for how long (Programmed=False, reason AzureTimeout),
// still polling.
func (p *Provider) runsLong(key, what string, elapsed time.Duration) {
	if elapsed <= p.cfg.WaitBound {
		return
	}
	// whole minutes, so that the status changes once a minute, not per poll
	msg := fmt.Sprintf("%s: waiting for %s, more than the %s bound; still polling", what, elapsed.Truncate(time.Minute), p.cfg.WaitBound)
	p.mu.Lock()
	st := p.state(key)
	st.progress.Served, st.progress.Message, st.progress.Reason = false, msg, keys.ReasonAzureTimeout
	p.mu.Unlock()
	p.log.Info("waiting long for Azure", "gateway", key, "what", what, "elapsed", elapsed.Round(time.Second))
	p.notify()
}

// settle waits while an operation runs on the resource (a previous
// process's, or someone's in the portal); nil when it is gone. Past four
// times Config.WaitBound it gives up with an error wrapping
// context.DeadlineExceeded; the next deployment waits again.
func (p *Provider) settle(ctx context.Context, key, kind string, path []string, cur any) (any, error) {
	start := p.cfg.Clock.Now()
	for cur != nil && armutil.Running(metaOf(cur).Properties.ProvisioningState) {
		state := metaOf(cur).Properties.ProvisioningState
		what := fmt.Sprintf("waiting for %s %s: provisioningState %s (an operation already running)", kind, path[len(path)-1], state)
		elapsed := p.cfg.Clock.Since(start)
		if elapsed > 4*p.cfg.WaitBound {
			return nil, fmt.Errorf("%s for %s, more than the %s limit: %w", what, elapsed.Round(time.Second), 4*p.cfg.WaitBound, context.DeadlineExceeded)
		}
		if elapsed > p.cfg.WaitBound {
			p.runsLong(key, what, elapsed)
		} else {
			p.setMessage(key, what)
		}
		p.log.Info("waiting for a running operation", "gateway", key, "resource", kind, "name", path[len(path)-1], "provisioningState", state)
		if err := deployloop.Sleep(ctx, p.cfg.PollInterval); err != nil {
			return nil, err
		}
		v, err := p.kinds[kind].get(ctx, path)
		if armerr.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", kind, path[len(path)-1], armerr.Describe(err))
		}
		cur = v
	}
	return cur, nil
}

// apply writes it when Azure's differs (or has none, or its last
// operation failed), and polls the write to its end.
func (p *Provider) apply(ctx context.Context, key string, it item, cur any) error {
	name := it.path[len(it.path)-1]
	cur, err := p.settle(ctx, key, it.kind, it.path, cur)
	if err != nil {
		return err
	}
	want := it.want
	verb, changes := "creating", []string(nil)
	if cur != nil {
		verb = "updating"
		m := metaOf(cur)
		changes = diff(want, cur)
		switch w := want.(type) {
		case *armcdn.Profile:
			c := *w
			changes = append(changes, armutil.TagDiff(c.Tags, m.Tags)...)
			c.Tags = armutil.WithTags(c.Tags, m.Tags)
			want = &c
		case *armcdn.AFDEndpoint:
			c := *w
			changes = append(changes, armutil.TagDiff(c.Tags, m.Tags)...)
			c.Tags = armutil.WithTags(c.Tags, m.Tags)
			want = &c
		}
		if s := m.Properties.ProvisioningState; s != "" && s != "Succeeded" {
			changes = append(changes, "provisioningState "+s)
		}
		if m.Properties.DeploymentStatus == string(armcdn.DeploymentStatusFailed) {
			changes = append(changes, "deploymentStatus Failed") // written again to deploy again
		}
		if len(changes) == 0 {
			return nil
		}
	}
	p.setMessage(key, fmt.Sprintf("%s %s (provisioningState Updating)", verb, it))
	p.log.Info(verb, "gateway", key, "resource", it.kind, "name", name, "changes", changes)
	op := opKey("put", it.kind, it.path)
	err = p.retry(ctx, key, it.kind+" "+name, func() error {
		_, err := p.kinds[it.kind].put(ctx, it.path, want, "", p.opTrack(ctx, key, op, fmt.Sprintf("%s %s", verb, it)))
		return err
	})
	if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		p.track(ctx, key, op, "") // ended: nothing to resume
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, it, armerr.Describe(err))
	}
	return nil
}

// remove deletes a resource the provider owns and no longer needs, and
// starts confirming its absence.
func (p *Provider) remove(ctx context.Context, key, kind string, path []string, cur any) error {
	name := path[len(path)-1]
	cur, err := p.settle(ctx, key, kind, path, cur)
	if err != nil {
		return err
	}
	if cur != nil {
		p.setMessage(key, fmt.Sprintf("withdrawing: deleting %s %s (provisioningState Deleting)", kind, name))
		p.log.Info("deleting", "gateway", key, "resource", kind, "name", name)
		op := opKey("delete", kind, path)
		err = p.retry(ctx, key, kind+" "+name, func() error {
			return p.kinds[kind].del(ctx, path, "", p.opTrack(ctx, key, op, "deleting "+kind+" "+name))
		})
		if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			p.track(ctx, key, op, "")
		}
		if err != nil && !armerr.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", kind, name, armerr.Describe(err))
		}
	}
	p.mu.Lock()
	st := p.state(key)
	label := kind + " " + name
	if st.absent[label] == nil {
		st.absent[label] = &absence{since: p.cfg.Clock.Now()}
	}
	p.mu.Unlock()
	return nil
}

// withdrawGateway deletes what the provider holds for a Gateway that left
// the model, in dependency order.
func (p *Provider) withdrawGateway(ctx context.Context, key string, profiles []string) error {
	p.mu.Lock()
	p.state(key).withdrawing = true
	p.mu.Unlock()
	var errs []error
	for _, prof := range profiles {
		if err := p.withdrawProfile(ctx, key, prof); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return p.fail(key, fmt.Errorf("withdrawing: %w", err))
	}
	return nil
}

// withdrawOrder is the order in which a profile's children are deleted:
// what references comes before what it references.
var withdrawOrder = []string{kindSecurity, kindRoute, kindRule, kindRuleSet, kindOrigin, kindOriginGroup, kindDomain, kindSecret, kindEndpoint}

// withdrawProfile deletes an owned profile's children in dependency
// order, then the profile, unless it holds children fleetnet did not
// create (deleting the profile would delete them).
func (p *Provider) withdrawProfile(ctx context.Context, key, profile string) error {
	obs, err := p.observe(ctx, profile)
	if err != nil {
		return fmt.Errorf("nothing deleted: %w", err)
	}
	if obs.profile == nil {
		return nil
	}
	if p.owner.Key(metaOf(obs.profile).Tags) != key {
		return nil
	}
	var foreign []string
	for _, kind := range withdrawOrder {
		for _, e := range obs.sorted(kind) {
			if !p.owns(key, kind, e) {
				foreign = append(foreign, kind+" "+e.path[len(e.path)-1])
				continue
			}
			if err := p.remove(ctx, key, kind, e.path, e.v); err != nil {
				return err
			}
		}
	}
	if len(foreign) > 0 {
		p.setMessage(key, fmt.Sprintf("withdrawn, but Front Door profile %s is kept: it holds resources fleetnet did not create (%s)", profile, strings.Join(foreign, ", ")))
		return nil
	}
	return p.remove(ctx, key, kindProfile, []string{profile}, obs.profile)
}

// A resource's state as assess classifies it (see programmedState).
const (
	stateProgrammed  = "programmed"
	statePropagating = "propagating "
)

// programmedState is what Azure's fields say of one resource of a
// Gateway's graph (cur, nil when Azure has none): stateProgrammed, or
// statePropagating and its deploymentStatus, both of which count as
// programmed, or a state that holds the Gateway's Programmed condition
// False, with detail for its message ("" to say the deploymentStatus).
//
// Programmed, from the fields Front Door documents: provisioningState
// Succeeded (the write is done), a deploymentStatus other than Failed,
// a custom domain's domainValidationState Approved, and a Private Link
// origin's connection Approved. deploymentStatus NotStarted or
// InProgress does not hold it: Front Door's REST reference shows a
// provisioned route as provisioningState Succeeded with deploymentStatus
// NotStarted (Routes - Get), describes deploymentStatus by its values
// only, and its FAQ says a change propagates to the edge within minutes
// while the profile keeps serving; deploymentStatus has been seen to
// stay NotStarted on resources that serve. Gateway API's Programmed means
// the configuration is "assumed to be ready soon in the underlying data
// plane", which a provisioned resource is. Propagation is told in the
// message, without holding the condition or reaching AzureTimeout.
func programmedState(st *gatewayState, it item, cur any) (state, detail string) {
	if cur == nil {
		return "missing", "not created yet"
	}
	m := metaOf(cur)
	deployment := m.Properties.DeploymentStatus
	done := "provisioned, deployed"
	if deployment != "" && deployment != string(armcdn.DeploymentStatusSucceeded) {
		done = "provisioned, deploymentStatus " + deployment
	}
	switch {
	case m.Properties.ProvisioningState != "Succeeded":
		return "provisioning " + m.Properties.ProvisioningState, "provisioningState " + m.Properties.ProvisioningState
	case deployment == string(armcdn.DeploymentStatusFailed):
		return "deployment Failed", "provisioned, deployment Failed"
	case it.kind == kindDomain && m.Properties.DomainValidationState != string(armcdn.DomainValidationStateApproved):
		token := ""
		if m.Properties.ValidationProperties != nil {
			token = m.Properties.ValidationProperties.ValidationToken
		}
		return "validation " + m.Properties.DomainValidationState, fmt.Sprintf("%s, domain validation %s: create the DNS TXT record _dnsauth.%s with value %s",
			done, m.Properties.DomainValidationState, it.label, token)
	case m.Properties.SharedPrivateLinkResource != nil &&
		st.linkStatus(m.Properties.SharedPrivateLinkResource.PrivateLink, m.Properties.SharedPrivateLinkResource.Status) != connectionApproved:
		status := st.linkStatus(m.Properties.SharedPrivateLinkResource.PrivateLink, m.Properties.SharedPrivateLinkResource.Status)
		return "private link " + status, done + ", " + privateLinkDetail(status, m.Properties.SharedPrivateLinkResource.PrivateLink)
	case deployment != "" && deployment != string(armcdn.DeploymentStatusSucceeded):
		return statePropagating + deployment, ""
	}
	return stateProgrammed, ""
}

// assess sets key's progress from what Azure has (obs) for g: Served
// when every resource is programmed (programmedState).
func (p *Provider) assess(key string, g graph, obs *observed) {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	defer func() {
		p.mu.Unlock()
		p.notify()
	}()
	st := p.state(key)
	items := g.items()
	var pending []string // groups of resources in the same state, in order
	pendingBy := map[string][]string{}
	var propagating []string // likewise, of resources programmed and propagating
	propagatingBy := map[string][]string{}
	late := false   // a resource pending longer than Config.WaitBound
	failed := false // a resource whose deployment ended Failed
	programmed, deployed := 0, 0
	var addrs []string
	seen := map[string]bool{}
	for _, it := range items {
		label := it.String()
		seen[label] = true
		cur := obs.get(it.kind, it.path)
		state, detail := programmedState(st, it, cur)
		old, ok := st.stamps[label]
		if !ok || old.state != state {
			old = stamp{state: state, since: now}
			st.stamps[label] = old
		}
		if state == stateProgrammed || strings.HasPrefix(state, statePropagating) {
			programmed++
			m := metaOf(cur)
			if it.kind == kindEndpoint && m.Properties.HostName != "" {
				addrs = append(addrs, m.Properties.HostName)
			}
			if it.kind == kindDomain {
				addrs = append(addrs, it.label)
			}
			if state == stateProgrammed {
				deployed++
				continue
			}
			group := fmt.Sprintf("provisioned, deploymentStatus %s for %s (propagating to Front Door's edge)", m.Properties.DeploymentStatus, now.Sub(old.since).Round(time.Second))
			if _, ok := propagatingBy[group]; !ok {
				propagating = append(propagating, group)
			}
			propagatingBy[group] = append(propagatingBy[group], it.short())
			continue
		}
		if detail == "" {
			detail = "provisioned, deployment " + metaOf(cur).Properties.DeploymentStatus
		}
		group := fmt.Sprintf("%s for %s", detail, now.Sub(old.since).Round(time.Second))
		if state == "deployment Failed" {
			// an end, not a wait: the next deploy writes it again
			failed = true
		} else if now.Sub(old.since) > p.cfg.WaitBound {
			group = fmt.Sprintf("%s for %s", detail, now.Sub(old.since).Truncate(time.Minute))
			// say so rather than wait without end
			group += fmt.Sprintf(", more than the %s bound; still polling", p.cfg.WaitBound)
			late = true
		}
		if _, ok := pendingBy[group]; !ok {
			pending = append(pending, group)
		}
		pendingBy[group] = append(pendingBy[group], it.short())
	}
	for label := range st.stamps {
		if !seen[label] {
			delete(st.stamps, label)
		}
	}
	// Withdrawn resources: confirmed once absent for AbsentFor, over at
	// least two observations.
	var withdrawing []string
	for _, label := range slices.Sorted(maps.Keys(st.absent)) {
		if label == "" {
			continue
		}
		a := st.absent[label]
		kind, name, _ := strings.Cut(label, " ")
		if kind == kindProfile {
			delete(st.absent, label)
			continue
		}
		present := false
		for _, e := range obs.sorted(kind) {
			if strings.EqualFold(e.path[len(e.path)-1], name) {
				present = true
			}
		}
		if present {
			a.since, a.seen = now, 0
		} else {
			a.seen++
		}
		if a.seen >= 2 && now.Sub(a.since) >= p.cfg.AbsentFor {
			delete(st.absent, label)
			p.log.Info("withdrawal confirmed", "gateway", key, "resource", label)
			continue
		}
		withdrawing = append(withdrawing, label)
	}
	var parts []string
	total := len(items)
	switch {
	case len(pending) == 0 && deployed == total:
		parts = append(parts, fmt.Sprintf("served by Azure Front Door %s profile %s at %s: all %d resources deployed", g.settings.SKU, g.profileName, strings.Join(addrs, ", "), total))
	case len(pending) == 0:
		parts = append(parts, fmt.Sprintf("served by Azure Front Door %s profile %s at %s: all %d resources provisioned, %d of them still propagating", g.settings.SKU, g.profileName, strings.Join(addrs, ", "), total, total-deployed))
	default:
		parts = append(parts, fmt.Sprintf("Azure Front Door %s profile %s: %d of %d resources programmed", g.settings.SKU, g.profileName, programmed, total))
		for _, group := range pending {
			parts = append(parts, strings.Join(pendingBy[group], ", ")+": "+group)
		}
	}
	for _, group := range propagating {
		parts = append(parts, strings.Join(propagatingBy[group], ", ")+": "+group)
	}
	for _, w := range withdrawing {
		a := st.absent[w]
		parts = append(parts, fmt.Sprintf("%s withdrawn, confirming its absence (%s of %s)", w, now.Sub(a.since).Round(time.Second), p.cfg.AbsentFor))
	}
	for _, r := range g.refused {
		parts = append(parts, "not served: "+r.String())
	}
	parts = append(parts, g.notes...)
	for _, kind := range withdrawOrder {
		for _, e := range obs.sorted(kind) {
			name := e.path[len(e.path)-1]
			if kind != kindEndpoint && !ours(kind, name) {
				parts = append(parts, fmt.Sprintf("%s %s left alone: fleetnet did not create it", kind, name))
			}
		}
	}
	st.progress = GatewayProgress{Served: len(pending) == 0, Message: clip(parts), Addresses: addrs,
		Refused: slices.Clone(g.refused), Withdrawing: withdrawing, Propagating: len(propagating) > 0}
	switch {
	case failed:
		st.progress.Reason = keys.ReasonAzureOperationFailed
	case late:
		st.progress.Reason = keys.ReasonAzureTimeout
	}
	if len(pending) == 0 {
		st.told = ""
	}
}

// privateLinkDetail says what a Private Link connection's status means.
func privateLinkDetail(status string, pl *struct {
	ID string `json:"id"`
}) string {
	pls := ""
	if pl != nil {
		pls = pl.ID
	}
	switch status {
	case "Pending":
		return fmt.Sprintf("Private Link connection Pending: waiting for the owner of %s to approve it (fleetnet approves it only when the Private Link Service is tagged %s=%s, or cloud-provider-azure made it for the Service and the cluster's ServiceExport has %s=%s)", pls,
			keys.TagAzurePLSApproval, keys.PLSApprovalAuto, keys.AnnotationPLSApproval, keys.PLSApprovalAuto)
	case "Rejected":
		return fmt.Sprintf("Private Link connection Rejected by the owner of %s", pls)
	case "Disconnected":
		return fmt.Sprintf("Private Link connection Disconnected from %s", pls)
	case "Timeout":
		return fmt.Sprintf("Private Link connection timed out waiting for approval on %s", pls)
	}
	return "Private Link connection " + status
}

// maxMessage keeps a Programmed message well within a condition's 32768
// characters.
const maxMessage = 8192

// clip joins parts, leaving out the last ones (counted) past maxMessage.
func clip(parts []string) string {
	msg := ""
	for i, p := range parts {
		next := msg
		if next != "" {
			next += "; "
		}
		next += p
		if len(next) > maxMessage-40 {
			return fmt.Sprintf("%s; and %d more", msg, len(parts)-i)
		}
		msg = next
	}
	return msg
}

// routeDomains are the domains a route serves: its custom domains' ids
// and "default" for the endpoint's own domain.
func routeDomains(r *armcdn.Route) []string {
	var out []string
	if r.Properties == nil {
		return out
	}
	for _, d := range r.Properties.CustomDomains {
		out = append(out, strings.ToLower(armutil.Deref(d.ID)))
	}
	if r.Properties.LinkToDefaultDomain == nil || *r.Properties.LinkToDefaultDomain == armcdn.LinkToDefaultDomainEnabled {
		out = append(out, "default")
	}
	return out
}

// linkStatus is the state of an origin's Private Link connection: as its
// Private Link Service reports it (documented), read by approve; when that
// shows no connection of the Gateway's (not requested yet, or its owner
// rewrote the description), the origin's own status, and Pending when
// that is empty too.
func (st *gatewayState) linkStatus(privateLink *struct {
	ID string `json:"id"`
}, status string) string {
	if privateLink != nil {
		if s := st.links[strings.ToLower(privateLink.ID)]; s != "" {
			return s
		}
	}
	if status != "" {
		return status
	}
	return connectionPending
}
