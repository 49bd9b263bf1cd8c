// Package frontdoor is the Azure Front Door (Standard/Premium) provider
// of Gateways: each Gateway of a GatewayClass configured for it
// (Config.Classes) becomes, in one resource group, a Front Door profile of
// the class's tier with one endpoint, a custom domain per listener
// hostname with an AFD-managed certificate or, for a listener named in
// keys.AnnotationAzureListenerCertificates, a customer certificate (a
// secret referencing its Key Vault secret), an origin group per set of backends
// (health probe, load-balancing samples) with an origin per backend and
// exporting cluster, a route per HTTPRoute match Front Door can express,
// a rule set per route for its header modifiers, redirects and rewrites,
// and a security policy for a WAF policy
// (github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2).
// plan.go derives that graph purely and says what cannot be expressed;
// origins.go finds each cluster's origin (the public IP of its regional
// load balancer frontend, or the Private Link Service in front of an
// internal one) and approves Private Link connections where the PLS
// allows it.
//
// The provider is level-based: each Deploy observes the Gateway's
// profile and its children, writes in dependency order only what differs
// from the plan (drift made in the portal is repaired), and deletes what
// it owns and no longer needs in the reverse order (routes before the
// rule sets, origin groups and custom domains they reference, origins
// before their group). It owns a profile and endpoint by their tags
// (keys.TagAzureOwner = Config.Owner and the Gateway's namespace and
// name) and, inside its profile, children by their name prefix ("fn-",
// "fn"): anything else is never changed or deleted. Nothing is deleted
// when an observation failed; errors never remove what serves.
//
// Front Door reports provisioningState (ARM's operation) and a separate
// deploymentStatus (propagation to its edge), which may stay NotStarted
// long after provisioning succeeded, also on resources that serve. The
// provider waits for provisioningState only (dependent resources do not
// need their dependencies deployed); a Gateway is Served (Programmed)
// when its whole graph is provisioned, no deployment Failed, its custom
// domains validated and Private Link connections approved
// (programmedState says why deploymentStatus NotStarted or InProgress
// does not hold it), and Progress says, per Gateway, what is still
// pending or propagating and for how long. Refresh (run by Run every PollInterval)
// re-reads the Gateways not yet served. Throttling (429) and conflicts
// (409, another operation in progress) are waited for with backoff at
// info level; other failures are returned, told once per Gateway through
// Config.Event with the ARM error's code and message. Long-running
// operations' resume tokens are kept in Config.Tokens while they run, so
// that a restarted controller resumes them instead of starting over.
//
// Deployments run through deployloop: one at a time, the last model
// deployed again every Config.Resync, a newer model cancelling such a
// resync (its operations' resume tokens stay, so the next deployment
// resumes them); this package plugs in deploy and refresh.
package frontdoor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
	"k8s.io/utils/clock"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armerr"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"

	"github.com/fleetnet/fleetnet/internal/gateway/provider"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/deployloop"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor/annotations"
)

// Class is the provider's name among providers (provider.Split's clouds).
const Class = "azure-front-door"

// DefaultWaitBound is Config.WaitBound's default: above the 10 to 40
// minutes a new profile's first deployment commonly takes.
const DefaultWaitBound = 45 * time.Minute

// Config configures the provider.
type Config struct {
	// SubscriptionID and ResourceGroup hold the Front Door profiles; the
	// resource group must exist.
	SubscriptionID string
	ResourceGroup  string
	// Owner is written in keys.TagAzureOwner and selects which profiles
	// the provider may change or delete: one per fleet sharing the
	// resource group. At most 256 characters.
	Owner string
	// Classes are the GatewayClasses served, with the Front Door tier
	// each selects (a Gateway's fleetnet.dev/azure-sku overrides it).
	Classes map[string]annotations.SKU
	// Credential authenticates to ARM.
	Credential azcore.TokenCredential
	// ClientOptions are the ARM clients' options; tests set Transport. A
	// zero Retry gets MaxRetries 5 and MaxRetryDelay 2m, so that ARM's
	// Retry-After on throttling is honoured.
	ClientOptions *arm.ClientOptions
	// TryTimeout bounds each try of every ARM request, polls included
	// (azcore's RetryOptions.TryTimeout): a try unanswered that long is
	// tried again, and once the retries are spent the Gateway's deploy
	// fails with reason AzureTimeout naming the request, while the other
	// Gateways go on. 0 keeps ClientOptions' or else
	// armutil.DefaultTryTimeout (30s).
	TryTimeout time.Duration
	// PollInterval is how often a long-running operation is polled when
	// ARM gives no Retry-After, the first backoff on 409/429, and how
	// often Run refreshes Gateways not yet served (default 10s).
	PollInterval time.Duration
	// WaitBound is how long an operation, a custom domain's validation or
	// a Private Link connection may take before the Gateway is Programmed=False
	// with reason AzureTimeout naming it and how long it waited (default
	// DefaultWaitBound); polling goes on. Past four times WaitBound a
	// deployment stops waiting for an operation (it fails with
	// AzureTimeout, and the next one resumes the operation).
	WaitBound time.Duration
	// Parallelism is how many Gateways are deployed at once (default 4).
	Parallelism int
	// Resync is how often Run deploys the last model again (default
	// deployloop.DefaultResync, 10m).
	Resync time.Duration
	// AbsentFor is how long a withdrawn resource must have been observed
	// absent (at least twice) before its withdrawal is reported complete
	// (default 2m): one observation of an eventually consistent list is
	// not proof.
	AbsentFor time.Duration
	// Tokens keeps the resume tokens of running operations (nil: kept in
	// memory only, lost on restart).
	Tokens TokenStore
	// Event, when set, is told real failures (Warning, reason the kind of
	// failure from armerr.Reason, the ARM code and message), once per
	// Gateway and message.
	Event func(gateway, reason, message string)
	// Clock measures how long a resource has been deploying (default the
	// real clock).
	Clock clock.PassiveClock
	Log   *slog.Logger
}

// Validate checks what New needs.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ name, value string }{{"subscription id", c.SubscriptionID}, {"resource group", c.ResourceGroup}, {"owner", c.Owner}} {
		if strings.TrimSpace(f.value) == "" {
			errs = append(errs, fmt.Errorf("%s: the %s is required", Class, f.name))
		}
	}
	if len(c.Owner) > armutil.MaxTagValue {
		errs = append(errs, fmt.Errorf("%s: the owner %q is longer than an Azure tag value (256 characters)", Class, c.Owner))
	}
	if len(c.Classes) == 0 {
		errs = append(errs, fmt.Errorf("%s: at least one GatewayClass is required", Class))
	}
	for name, sku := range c.Classes {
		if sku != annotations.SKUStandard && sku != annotations.SKUPremium {
			errs = append(errs, fmt.Errorf("%s: GatewayClass %s: tier %q: want Standard or Premium", Class, name, sku))
		}
	}
	if c.Credential == nil {
		errs = append(errs, fmt.Errorf("%s: a credential is required", Class))
	}
	if c.TryTimeout < 0 {
		errs = append(errs, fmt.Errorf("%s: TryTimeout %s: must not be negative", Class, c.TryTimeout))
	}
	return errors.Join(errs...)
}

// GatewayProgress is where one Gateway stands at Front Door.
type GatewayProgress struct {
	// Served: the Gateway is programmed: every resource of its graph is
	// provisioned and its deployment not Failed, its custom domains
	// validated and Private Link connections approved (programmedState).
	Served bool
	// Message says where it stands, for the Programmed condition.
	Message string
	// Reason is the kind of failure of its last deploy (armerr.Reason),
	// "" when it did not fail.
	Reason string
	// Addresses are the endpoint's host name and the custom domains.
	Addresses []string
	// Refused are the route matches Front Door cannot express, for the
	// HTTPRoutes' status.
	Refused []Refusal
	// Withdrawing are resources deleted whose absence is not yet
	// confirmed (Config.AbsentFor).
	Withdrawing []string
	// Propagating: a resource is programmed but its deploymentStatus is
	// not yet Succeeded. The Gateway is Served meanwhile; refreshes go on
	// until the deployment is told done (or Failed).
	Propagating bool
}

// stamp is a resource's state and since when the provider sees it.
type stamp struct {
	state string
	since time.Time
}

// absence counts the observations of something withdrawn.
type absence struct {
	since time.Time
	seen  int
}

type gatewayState struct {
	progress GatewayProgress
	// withdrawing: the Gateway left the model; its entry goes once its
	// profile's absence is confirmed.
	withdrawing bool
	stamps      map[string]stamp
	absent      map[string]*absence // by resource label, "" the whole Gateway
	told        string
	// links is, per Private Link Service (lowercase id) of the Gateway's
	// origins, the state of its connection there as the service reports
	// it (approve); Programmed reads it rather than the origins' status.
	links map[string]string
	// want is the input (inputOf) of the Gateway's job for the newest
	// model; deployed that of its last job that ended without error: the
	// Gateway is current when they are equal.
	want, deployed string
}

// Provider implements provider.Provider for Gateways of Config.Classes.
type Provider struct {
	cfg    Config
	target target
	// owner recognises the profiles and endpoints the provider owns and
	// the Gateway (namespace/name) each serves.
	owner armutil.Owner
	log   *slog.Logger
	kinds map[string]ops
	net   *networkClients
	// skipLimits leaves the limits unchecked, so that a test can show
	// what Azure answers without them.
	skipLimits bool
	// loop runs deploy and refresh, and resyncs; lanes runs each
	// Gateway's job of a deployment.
	loop  *deployloop.Loop
	lanes *deployloop.Lanes
	// metrics, once SetMetrics is called, counts the ARM clients' tries
	// and the Private Link connections.
	metrics *atomic.Pointer[provider.Metrics]

	mu       sync.Mutex
	gateways map[string]*gatewayState
}

var _ provider.Provider = (*Provider)(nil)

// New builds the provider and its ARM clients; it makes no request.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	metrics := &atomic.Pointer[provider.Metrics]{}
	opts := armutil.ClientOptions(cfg.ClientOptions, cfg.TryTimeout, armutil.Observe(func(o armutil.Observation) {
		metrics.Load().ObserveARM(Class, o.Operation, o.Status, o.Unanswered, o.RetryAfter)
	}))
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = defaultPollEvery
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 4
	}
	if cfg.WaitBound <= 0 {
		cfg.WaitBound = DefaultWaitBound
	}
	if cfg.AbsentFor <= 0 {
		cfg.AbsentFor = 2 * time.Minute
	}
	if cfg.Tokens == nil {
		cfg.Tokens = &MemoryTokens{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	f, err := armcdn.NewClientFactory(cfg.SubscriptionID, cfg.Credential, &opts)
	if err != nil {
		return nil, fmt.Errorf("%s: creating the Front Door clients: %w", Class, err)
	}
	p := &Provider{cfg: cfg, log: cfg.Log.With("provider", Class),
		target: target{subscription: cfg.SubscriptionID, resourceGroup: cfg.ResourceGroup, owner: cfg.Owner},
		owner: armutil.Owner{Tag: keys.TagAzureOwner, Value: cfg.Owner,
			NamespaceTag: keys.TagAzureGatewayNamespace, NameTag: keys.TagAzureGatewayName},
		kinds: kinds(f, cfg.ResourceGroup, cfg.PollInterval, 4*cfg.WaitBound, cfg.Clock), net: &networkClients{cred: cfg.Credential, opts: opts},
		gateways: map[string]*gatewayState{}, metrics: metrics}
	p.lanes = deployloop.NewLanes(cfg.Parallelism, p.log)
	p.loop = deployloop.New(deployloop.Hooks{Deploy: p.deploy, Refresh: p.refresh, RefreshEvery: cfg.PollInterval,
		Resync: cfg.Resync, Log: p.log})
	return p, nil
}

// SetMetrics makes the provider count its ARM requests' errors and
// throttling, and its Private Link connections, in m (nil: none), under
// its Class.
func (p *Provider) SetMetrics(m *provider.Metrics) { p.metrics.Store(m) }

// SetOnProgress sets a function called whenever progress changes.
func (p *Provider) SetOnProgress(f func()) { p.loop.SetOnProgress(f) }

func (p *Provider) notify() { p.loop.Notify() }

// Gateways is the progress of every Gateway the provider serves or is
// withdrawing, by namespace/name.
func (p *Provider) Gateways() map[string]GatewayProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]GatewayProgress, len(p.gateways))
	for k, st := range p.gateways {
		gp := st.progress
		gp.Addresses = slices.Clone(gp.Addresses)
		gp.Refused = slices.Clone(gp.Refused)
		gp.Withdrawing = slices.Clone(gp.Withdrawing)
		out[k] = gp
	}
	return out
}

// Progress summarises the Gateways: Served when every one is, for the
// newest model.
func (p *Provider) Progress() provider.Progress {
	gws := p.Gateways()
	version, last := p.loop.Deployed()
	p.mu.Lock()
	defer p.mu.Unlock()
	served := 0
	var msgs, addrs []string
	for _, k := range slices.Sorted(maps.Keys(gws)) {
		g := gws[k]
		if g.Served {
			served++
		}
		msgs = append(msgs, fmt.Sprintf("Gateway %s: %s", k, g.Message))
		addrs = append(addrs, g.Addresses...)
	}
	current := last != nil && version == last.Version
	msg := fmt.Sprintf("%d of %d Gateways served by Azure Front Door", served, len(gws))
	if len(msgs) > 0 {
		msg += "; " + strings.Join(msgs, "; ")
	}
	per := make(map[string]provider.LoadBalancerProgress, len(gws))
	var refusals []provider.RouteRefusal
	for _, k := range slices.Sorted(maps.Keys(gws)) {
		ns, name, _ := strings.Cut(k, "/")
		for _, r := range gws[k].Refused {
			refusals = append(refusals, provider.RouteRefusal{GatewayNamespace: ns, GatewayName: name, RouteNamespace: r.RouteNamespace, RouteName: r.RouteName,
				Rule: r.Rule, Match: r.Match, Reason: r.Reason})
		}
	}
	for k, g := range gws {
		// Each Gateway is current on its own: another Gateway's failure
		// does not make it pending.
		cur := false
		if st := p.gateways[k]; st != nil && last != nil {
			cur = st.deployed == st.want
		}
		m := g.Message
		if !cur {
			m = "a newer configuration is being deployed; " + m
		}
		per[k] = provider.LoadBalancerProgress{Served: g.Served && cur, Message: m, Reason: g.Reason, Addresses: g.Addresses}
	}
	return provider.Progress{Version: version, Served: current && served == len(gws), Message: msg, Addresses: addrs,
		Gateways: per, RouteRefusals: refusals, ClassVersions: map[string]string{Class: version}}
}

// Deploy makes Front Door match the Gateways of m of Config.Classes, and
// returns once every write it made has been provisioned (deployment goes
// on: see Refresh). It cancels a resync in progress and waits for any
// other deployment or refresh.
func (p *Provider) Deploy(ctx context.Context, m *edgev1.Model) error { return p.loop.Deploy(ctx, m) }

// Run refreshes the Gateways not yet served every PollInterval and
// deploys the last model again every Resync (drift, failed operations)
// until ctx ends. Run it on the leader only.
func (p *Provider) Run(ctx context.Context) {
	p.loop.Run(ctx)
	p.lanes.Stop()
}

// served is the Gateways of m this provider serves, with their tiers;
// held are those refused whose last accepted configuration the controller
// does not know (edgev1.Gateway.Hold): their profiles stay as they are.
func (p *Provider) served(m *edgev1.Model) (served map[string]edgev1.Gateway, held map[string]bool) {
	served, held = map[string]edgev1.Gateway{}, map[string]bool{}
	if m == nil {
		return served, held
	}
	for _, gw := range m.Gateways {
		if _, ok := p.cfg.Classes[gw.Class]; !ok {
			continue
		}
		if gw.Hold {
			held[gw.Namespace+"/"+gw.Name] = true
		} else {
			served[gw.Namespace+"/"+gw.Name] = gw
		}
	}
	return served, held
}

func (p *Provider) state(key string) *gatewayState {
	st := p.gateways[key]
	if st == nil {
		st = &gatewayState{stamps: map[string]stamp{}, absent: map[string]*absence{}}
		p.gateways[key] = st
	}
	return st
}

// setMessage sets key's message, not served, keeping the rest.
func (p *Provider) setMessage(key, msg string) {
	p.mu.Lock()
	st := p.state(key)
	st.progress.Served, st.progress.Message, st.progress.Reason = false, msg, ""
	p.mu.Unlock()
	p.notify()
}

// fail reports a failure of key: its message and, for a failure that is
// not transient, a Warning event once per message. A deployment
// cancelled (superseded by a newer model, or the controller stopping) is
// no failure of Azure's: it is not told.
func (p *Provider) fail(key string, err error) error {
	msg := err.Error()
	cancelled := errors.Is(err, context.Canceled)
	reason := armerr.Reason(err)
	var le *limitError
	if errors.As(err, &le) {
		reason = le.Reason()
	}
	p.mu.Lock()
	st := p.state(key)
	st.progress.Served = false
	st.progress.Message = "not programmed, what Front Door serves stays: " + msg
	if !cancelled {
		st.progress.Reason = reason
	}
	tell := st.told != msg && !cancelled
	if tell {
		st.told = msg
	}
	p.mu.Unlock()
	if cancelled {
		p.log.Info("deploying to Azure Front Door cancelled", "gateway", key, "err", err)
	} else {
		p.log.Error("deploying to Azure Front Door failed", "gateway", key, "err", err)
	}
	if tell && p.cfg.Event != nil {
		p.cfg.Event(key, reason, msg)
	}
	p.notify()
	return fmt.Errorf("gateway %s: %w", key, err)
}

// inputOf identifies what a Gateway's job deploys: its model entry and
// class (which the entry's JSON leaves out).
func inputOf(gw edgev1.Gateway) string {
	data, err := json.Marshal(gw)
	if err != nil {
		panic(err) // plain structs of strings and numbers always marshal
	}
	sum := sha256.Sum256(append(data, gw.Class...))
	return hex.EncodeToString(sum[:8])
}

// deploy starts, in each Gateway's lane, the job that makes Azure match
// its entry in m (or withdraws it), and waits for those jobs until they
// end or ctx does: a Gateway whose operation hangs holds neither the other
// Gateways nor the next model, which joins the jobs still running for
// entries it has unchanged.
func (p *Provider) deploy(ctx context.Context, m *edgev1.Model) error {
	want, hold := p.served(m)
	p.mu.Lock()
	for key := range hold {
		st := p.state(key)
		st.withdrawing = false
		st.progress.Message, st.progress.Reason = "the current generation is refused; what Azure Front Door serves for it stays as it is", ""
		st.want, st.deployed = "hold", "hold" // nothing to do for it in this model
	}
	p.mu.Unlock()
	profiles, err := p.kinds[kindProfile].list(ctx, nil)
	if err != nil {
		err = fmt.Errorf("nothing changed: listing the Front Door profiles of resource group %s: %w", p.cfg.ResourceGroup, armerr.Describe(err))
		for key := range want {
			p.setMessage(key, err.Error())
		}
		return err
	}
	held := map[string][]string{} // gateway key -> owned profile names
	for _, v := range profiles {
		mv := metaOf(v)
		if k := p.owner.Key(mv.Tags); k != "" {
			held[k] = append(held[k], mv.Name)
		}
	}
	var jobs []*deployloop.Job
	for _, key := range slices.Sorted(maps.Keys(want)) {
		gw, input := want[key], inputOf(want[key])
		p.mu.Lock()
		st := p.state(key)
		st.withdrawing, st.want = false, input
		p.mu.Unlock()
		jobs = append(jobs, p.lanes.Start(key, input, func(ctx context.Context) error {
			if err := p.deployGateway(ctx, gw, held[key]); err != nil {
				return err
			}
			p.mu.Lock()
			p.state(key).deployed = input
			p.mu.Unlock()
			p.notify()
			return nil
		}))
	}
	for _, key := range slices.Sorted(maps.Keys(held)) {
		if _, ok := want[key]; !ok && !hold[key] {
			profiles := held[key]
			jobs = append(jobs, p.lanes.Start(key, "withdraw "+strings.Join(profiles, ","), func(ctx context.Context) error {
				return p.withdrawGateway(ctx, key, profiles)
			}))
		}
	}
	err = deployloop.Wait(ctx, jobs)
	// Gateways gone whose profiles are gone too: confirm the absence.
	p.mu.Lock()
	var gone []string
	for key := range p.gateways {
		if _, ok := want[key]; !ok && len(held[key]) == 0 && !hold[key] {
			gone = append(gone, key)
		}
	}
	p.mu.Unlock()
	for _, key := range gone {
		p.confirmGone(key)
	}
	return err
}

// confirmGone counts an observation of key's profiles' absence, and drops
// key once that absence is sustained.
func (p *Provider) confirmGone(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.gateways[key]
	if st == nil {
		return
	}
	a := st.absent[""]
	now := p.cfg.Clock.Now()
	if a == nil {
		a = &absence{since: now}
		st.absent[""] = a
	}
	a.seen++
	if a.seen >= 2 && now.Sub(a.since) >= p.cfg.AbsentFor {
		delete(p.gateways, key)
		p.log.Info("withdrawal complete", "gateway", key)
		return
	}
	st.withdrawing = true
	st.progress = GatewayProgress{Message: fmt.Sprintf("withdrawn from Azure Front Door, confirming: absent for %s of %s (%d observations)",
		now.Sub(a.since).Round(time.Second), p.cfg.AbsentFor, a.seen), Withdrawing: []string{"profile"}}
}

// Refresh re-reads the Gateways not yet served (deployment status,
// domain validation, Private Link connections) and those being
// withdrawn, and updates their progress; it writes only Private Link
// approvals. It does nothing while a deployment runs (that refreshes as
// well).
func (p *Provider) Refresh(ctx context.Context) error { return p.loop.Refresh(ctx) }

// refresh is Refresh's work, which the loop runs between deployments.
func (p *Provider) refresh(ctx context.Context) error {
	_, m := p.loop.Deployed()
	p.mu.Lock()
	var pending, gone []string
	for key, st := range p.gateways {
		switch {
		case st.withdrawing:
			gone = append(gone, key)
		case m == nil || st.deployed != st.want || p.lanes.Running(key):
			// its job runs (it tells its own progress), or its last one
			// failed: the failure stays told until the next deploy (the
			// queue's retry, or a resync)
		case !st.progress.Served || len(st.progress.Withdrawing) > 0 || st.progress.Propagating:
			pending = append(pending, key)
		}
	}
	p.mu.Unlock()
	want, _ := p.served(m)
	var errs []error
	for _, key := range pending {
		gw, ok := want[key]
		if !ok {
			continue
		}
		if err := p.refreshGateway(ctx, gw); err != nil {
			errs = append(errs, err)
		}
	}
	if len(gone) > 0 {
		profiles, err := p.kinds[kindProfile].list(ctx, nil)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("listing profiles: %w", armerr.Describe(err)))...)
		}
		held := map[string]bool{}
		for _, v := range profiles {
			if k := p.owner.Key(metaOf(v).Tags); k != "" {
				held[k] = true
			}
		}
		for _, key := range gone {
			if !held[key] {
				p.confirmGone(key)
			}
		}
	}
	return errors.Join(errs...)
}

func (p *Provider) settingsOf(gw edgev1.Gateway) (annotations.Settings, error) {
	return annotations.Parse(gw.Annotations, p.cfg.Classes[gw.Class])
}

func (p *Provider) refreshGateway(ctx context.Context, gw edgev1.Gateway) error {
	key := gw.Namespace + "/" + gw.Name
	s, err := p.settingsOf(gw)
	if err != nil {
		return nil // told by deploy
	}
	origins := p.resolveOrigins(ctx, gw, s)
	g := planFor(p.target, gw, s, origins)
	obs, err := p.observe(ctx, g.profileName)
	if err != nil {
		return fmt.Errorf("gateway %s: %w", key, err)
	}
	if err := p.approve(ctx, key, g, obs); err != nil {
		return p.fail(key, err)
	}
	p.assess(key, g, obs)
	return nil
}
