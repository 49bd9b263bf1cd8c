// Package crossregion is the azure-cross-region load balancer provider:
// each MultiClusterLoadBalancer of that class becomes, in one resource
// group, a Global-tier Standard static public IP and a cross-region
// (Global tier) Standard load balancer with one frontend on it, one
// backend pool whose addresses are the member clusters' regional load
// balancer frontends, and a load-balancing rule per port
// (github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6).
// plan.go says what Azure cannot express and how that is reported.
//
// The provider is level-based and keeps no state of its own: each Deploy
// lists the resource group's load balancers and public IPs, recognises
// its own by tags (TagOwner = Config.Owner, TagNamespace, TagName), waits
// for operations already running on them (a previous process's: their
// provisioningState says so), writes only what differs from the model,
// and deletes its resources of load balancers that left the model, the
// load balancer before its public IP. A resource without its owner tag is
// never changed or deleted, and nothing is deleted when a list failed.
// Long-running operations are polled to their end within Deploy, and
// Progress says, per load balancer, which operation runs; Served once
// every resource is Succeeded as the model wants. Throttling (429 with
// Retry-After) and transient 5xx are retried by azcore's retry policy;
// a write refused with 409 AnotherOperationInProgress waits for the
// running operation and is tried once more; what persists is returned,
// wrapped with the ARM error's status, code and message.
//
// Deployments run through deployloop: one at a time, the last model
// deployed again every Config.Resync (drift, failed operations), a newer
// model cancelling such a resync; this package plugs in deploy.
package crossregion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armerr"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"

	"github.com/fleetnet/fleetnet/internal/gateway/provider"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/deployloop"
)

// Class is the load balancer class this provider serves.
const Class = "azure-cross-region"

// DefaultWaitBound is Config.WaitBound's default: load balancer and public
// IP operations end within minutes.
const DefaultWaitBound = 20 * time.Minute

// Config configures the provider.
type Config struct {
	// SubscriptionID and ResourceGroup hold the provider's resources; the
	// resource group must exist.
	SubscriptionID string
	ResourceGroup  string
	// Location is the resources' home region, one where Azure deploys
	// Global-tier load balancers (e.g. westeurope, eastus2).
	Location string
	// Owner is written in TagOwner on every resource and selects which
	// resources the provider may change or delete: one per fleet (or per
	// gateway installation) sharing the resource group. At most 256
	// characters.
	Owner string
	// Credential authenticates to ARM (azidentity in production; see
	// NewCredential).
	Credential azcore.TokenCredential
	// ClientOptions are the ARM clients' options; nil is Azure's public
	// cloud with the default retry options below. Tests set Transport.
	// A zero Retry gets MaxRetries 5 and MaxRetryDelay 2m, so that ARM's
	// Retry-After on throttling (often tens of seconds) is honoured.
	ClientOptions *arm.ClientOptions
	// TryTimeout bounds each try of every ARM request, polls included
	// (azcore's RetryOptions.TryTimeout): a try unanswered that long is
	// tried again, and once the retries are spent the load balancer's
	// deploy fails with reason AzureTimeout. 0 keeps ClientOptions' or
	// else armutil.DefaultTryTimeout (30s).
	TryTimeout time.Duration
	// PollInterval is how often a long-running operation is polled when
	// ARM gives no Retry-After (default 10s; at least 1s outside tests).
	PollInterval time.Duration
	// Parallelism is how many load balancers are deployed at once
	// (default 4).
	Parallelism int
	// WaitBound is how long an operation may run before its load
	// balancer is Programmed=False with reason AzureTimeout naming it and
	// how long it waited (default DefaultWaitBound); polling goes on. Past
	// four times WaitBound a deployment stops waiting (it fails with
	// AzureTimeout; the next one waits for the operation again).
	WaitBound time.Duration
	// Resync is how often Run deploys the last model again to repair
	// drift (default deployloop.DefaultResync, 10m).
	Resync time.Duration
	Log    *slog.Logger
}

// Validate checks what New needs.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ name, value string }{{"subscription id", c.SubscriptionID}, {"resource group", c.ResourceGroup}, {"location", c.Location}, {"owner", c.Owner}} {
		if strings.TrimSpace(f.value) == "" {
			errs = append(errs, fmt.Errorf("azure-cross-region: the %s is required", f.name))
		}
	}
	if len(c.Owner) > armutil.MaxTagValue {
		errs = append(errs, fmt.Errorf("azure-cross-region: the owner %q is longer than an Azure tag value (256 characters)", c.Owner))
	}
	if c.Credential == nil {
		errs = append(errs, errors.New("azure-cross-region: a credential is required"))
	}
	if c.TryTimeout < 0 {
		errs = append(errs, fmt.Errorf("azure-cross-region: TryTimeout %s: must not be negative", c.TryTimeout))
	}
	return errors.Join(errs...)
}

// Provider implements provider.Provider for the azure-cross-region class.
type Provider struct {
	cfg    Config
	target target
	// owner recognises the resources the provider owns and the load
	// balancer (namespace/name) each serves.
	owner armutil.Owner
	log   *slog.Logger
	lbs   *armnetwork.LoadBalancersClient
	pips  *armnetwork.PublicIPAddressesClient
	// loop runs deploy, one deployment at a time, and resyncs; lanes
	// runs each load balancer's job of a deployment.
	loop  *deployloop.Loop
	lanes *deployloop.Lanes
	// metrics, once SetMetrics is called, counts the ARM clients' tries.
	metrics *atomic.Pointer[provider.Metrics]

	mu      sync.Mutex
	entries map[string]provider.LoadBalancerProgress
	// deployed is, per load balancer, the input (inputOf) of its last job
	// that ended without error; taken is the version of the newest model
	// whose jobs were started, for which entries stand.
	deployed map[string]string
	taken    string
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
		cfg.PollInterval = 10 * time.Second
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 4
	}
	if cfg.WaitBound <= 0 {
		cfg.WaitBound = DefaultWaitBound
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	f, err := armnetwork.NewClientFactory(cfg.SubscriptionID, cfg.Credential, &opts)
	if err != nil {
		return nil, fmt.Errorf("azure-cross-region: creating the network clients: %w", err)
	}
	p := &Provider{cfg: cfg, log: cfg.Log.With("provider", Class),
		target: target{subscription: cfg.SubscriptionID, resourceGroup: cfg.ResourceGroup, location: cfg.Location, owner: cfg.Owner},
		owner:  armutil.Owner{Tag: TagOwner, Value: cfg.Owner, NamespaceTag: TagNamespace, NameTag: TagName},
		lbs:    f.NewLoadBalancersClient(), pips: f.NewPublicIPAddressesClient(), entries: map[string]provider.LoadBalancerProgress{},
		deployed: map[string]string{}, metrics: metrics, lanes: deployloop.NewLanes(cfg.Parallelism, cfg.Log.With("provider", Class))}
	p.loop = deployloop.New(deployloop.Hooks{Deploy: p.deploy, Resync: cfg.Resync, Log: p.log})
	return p, nil
}

// SetMetrics makes the provider count its ARM requests' errors and
// throttling in m (nil: none), under its Class.
func (p *Provider) SetMetrics(m *provider.Metrics) { p.metrics.Store(m) }

// SetOnProgress sets a function called whenever Progress changes during
// a deployment (the controller's trigger), so that status follows long
// operations rather than only their end.
func (p *Provider) SetOnProgress(f func()) { p.loop.SetOnProgress(f) }

// Progress is where each load balancer of the class stands: an entry per
// load balancer for which the provider holds (or is creating) resources,
// withdrawn ones included until their resources are gone.
func (p *Provider) Progress() provider.Progress {
	version, last := p.loop.Deployed()
	p.mu.Lock()
	defer p.mu.Unlock()
	taken := p.taken
	entries := make(map[string]provider.LoadBalancerProgress, len(p.entries))
	served := 0
	for k, e := range p.entries {
		e.Addresses = slices.Clone(e.Addresses)
		entries[k] = e
		if e.Served {
			served++
		}
	}
	current := last != nil && version == last.Version
	return provider.Progress{
		Version:       version,
		Served:        current && served == len(entries),
		Message:       fmt.Sprintf("%d of %d cross-region load balancers served", served, len(entries)),
		LoadBalancers: entries,
		// Each entry stands for the newest model once its jobs started:
		// a load balancer is current on its own, whatever another's
		// hanging operation holds back.
		ClassVersions: map[string]string{Class: taken},
	}
}

// Deploy makes Azure match the load balancers of m of class Class, and
// returns once every operation it started or found running has ended. It
// cancels a resync in progress and waits for any other deployment.
func (p *Provider) Deploy(ctx context.Context, m *edgev1.Model) error { return p.loop.Deploy(ctx, m) }

// Run deploys the last model again every Config.Resync until ctx ends, so
// that changes made to the resources outside fleetnet are repaired and
// operations that failed are tried again. Run it on the leader only.
func (p *Provider) Run(ctx context.Context) {
	p.loop.Run(ctx)
	p.lanes.Stop()
}

func (p *Provider) notify() { p.loop.Notify() }

func (p *Provider) set(key string, e provider.LoadBalancerProgress) {
	p.mu.Lock()
	p.entries[key] = e
	p.mu.Unlock()
	p.notify()
}

// message sets key's message, keeping its address, not served.
func (p *Provider) message(key, msg string) { p.failed(key, msg, "") }

// failed sets key's message and the kind of its failure (reason, ""
// none), keeping its address, not served.
func (p *Provider) failed(key, msg, reason string) {
	p.mu.Lock()
	e := p.entries[key]
	e.Served, e.Message, e.Reason = false, msg, reason
	p.entries[key] = e
	p.mu.Unlock()
	p.notify()
}

func (p *Provider) drop(key string) {
	p.mu.Lock()
	delete(p.entries, key)
	p.mu.Unlock()
	p.notify()
}

// observed is what the resource group holds, by lowercase name.
type observed struct {
	lbs  map[string]*armnetwork.LoadBalancer
	pips map[string]*armnetwork.PublicIPAddress
}

// observe lists the resource group's load balancers and public IPs, every
// page; any error fails it as a whole, so that nothing is decided on part
// of the resource group.
func (p *Provider) observe(ctx context.Context) (observed, error) {
	o := observed{lbs: map[string]*armnetwork.LoadBalancer{}, pips: map[string]*armnetwork.PublicIPAddress{}}
	lbPager := p.lbs.NewListPager(p.cfg.ResourceGroup, nil)
	for lbPager.More() {
		page, err := lbPager.NextPage(ctx)
		if err != nil {
			return o, fmt.Errorf("listing the load balancers of resource group %s: %w", p.cfg.ResourceGroup, armerr.Describe(err))
		}
		for _, v := range page.Value {
			o.lbs[strings.ToLower(armutil.Deref(v.Name))] = v
		}
	}
	pipPager := p.pips.NewListPager(p.cfg.ResourceGroup, nil)
	for pipPager.More() {
		page, err := pipPager.NextPage(ctx)
		if err != nil {
			return o, fmt.Errorf("listing the public IP addresses of resource group %s: %w", p.cfg.ResourceGroup, armerr.Describe(err))
		}
		for _, v := range page.Value {
			o.pips[strings.ToLower(armutil.Deref(v.Name))] = v
		}
	}
	return o, nil
}

func (p *Provider) deploy(ctx context.Context, m *edgev1.Model) error {
	plans := map[string]plan{}
	hold := map[string]bool{} // refused, last accepted unknown: kept as they are
	for _, lb := range m.LoadBalancers {
		switch {
		case lb.Class != Class:
		case lb.Hold:
			hold[lb.Namespace+"/"+lb.Name] = true
		default:
			pl := planFor(p.target, lb)
			plans[pl.key] = pl
		}
	}
	obs, err := p.observe(ctx)
	if err != nil {
		// Fail static: nothing is written or deleted on an unknown state.
		err = fmt.Errorf("nothing changed: %w", err)
		p.mu.Lock()
		for key := range plans {
			if _, ok := p.entries[key]; !ok {
				p.entries[key] = provider.LoadBalancerProgress{Message: err.Error()}
			}
		}
		p.mu.Unlock()
		p.notify()
		return err
	}
	held := map[string]bool{}
	for _, v := range obs.lbs {
		if k := p.owner.Key(v.Tags); k != "" {
			held[k] = true
		}
	}
	for _, v := range obs.pips {
		if k := p.owner.Key(v.Tags); k != "" {
			held[k] = true
		}
	}
	inputs := map[string]string{}
	for _, lb := range m.LoadBalancers {
		if lb.Class == Class && !lb.Hold {
			inputs[lb.Namespace+"/"+lb.Name] = inputOf(lb)
		}
	}
	p.mu.Lock()
	for key := range p.entries {
		if _, planned := plans[key]; !planned && !held[key] && !hold[key] {
			delete(p.entries, key)
		}
	}
	for key := range plans {
		if e, ok := p.entries[key]; !ok || p.deployed[key] != inputs[key] {
			// new, changed, or its last job failed: not served as planned yet
			e.Served, e.Message = false, "deploying"
			p.entries[key] = e
		}
	}
	for key := range hold {
		e := p.entries[key]
		e.Message, e.Reason = "the current generation is refused; what Azure serves for it stays as it is", ""
		p.entries[key] = e
	}
	p.taken = m.Version
	p.mu.Unlock()
	p.notify()

	var jobs []*deployloop.Job
	for _, key := range sortedKeys(plans) {
		pl, input := plans[key], inputs[key]
		jobs = append(jobs, p.lanes.Start(key, input, func(ctx context.Context) error {
			if err := p.ensure(ctx, pl, obs); err != nil {
				return fmt.Errorf("load balancer %s: %w", key, err)
			}
			p.mu.Lock()
			p.deployed[key] = input
			p.mu.Unlock()
			return nil
		}))
	}
	for _, key := range sortedKeys(held) {
		if _, planned := plans[key]; !planned && !hold[key] {
			jobs = append(jobs, p.lanes.Start(key, "withdraw", func(ctx context.Context) error {
				if err := p.withdraw(ctx, key, obs, ""); err != nil {
					return fmt.Errorf("load balancer %s: %w", key, err)
				}
				p.mu.Lock()
				delete(p.deployed, key)
				p.mu.Unlock()
				return nil
			}))
		}
	}
	return deployloop.Wait(ctx, jobs)
}

// inputOf identifies what a load balancer's job deploys: its model entry.
func inputOf(lb edgev1.LoadBalancer) string {
	data, err := json.Marshal(lb)
	if err != nil {
		panic(err) // plain structs of strings and numbers always marshal
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// ensure makes the public IP and load balancer of pl match it, then
// removes the key's resources of other names (left by an older naming).
func (p *Provider) ensure(ctx context.Context, pl plan, obs observed) error {
	fail := func(err error) error {
		if errors.Is(err, context.Canceled) {
			p.message(pl.key, "deploying again: "+err.Error()) // superseded, or stopping
		} else {
			p.failed(pl.key, err.Error(), armerr.Reason(err))
		}
		return err
	}
	curIP := obs.pips[strings.ToLower(pl.name)]
	if curIP != nil && p.owner.Key(curIP.Tags) != pl.key {
		return fail(fmt.Errorf("public IP address %s exists without fleetnet's tags for this load balancer (%s=%s): it is not touched", pl.name, TagOwner, p.cfg.Owner))
	}
	curLB := obs.lbs[strings.ToLower(pl.name)]
	if curLB != nil && p.owner.Key(curLB.Tags) != pl.key {
		return fail(fmt.Errorf("load balancer %s exists without fleetnet's tags for this load balancer (%s=%s): it is not touched", pl.name, TagOwner, p.cfg.Owner))
	}
	ip, err := apply(ctx, p, p.publicIPKind(), pl.key, pl.name, pl.pip, curIP, publicIPDiff)
	if err != nil {
		return fail(err)
	}
	address := armutil.Deref(armutil.Deref(ip.Properties).IPAddress)
	if address != "" {
		p.mu.Lock()
		e := p.entries[pl.key]
		e.Addresses = []string{address}
		p.entries[pl.key] = e
		p.mu.Unlock()
	}
	if _, err := apply(ctx, p, p.loadBalancerKind(), pl.key, pl.name, pl.lb, curLB, loadBalancerDiff); err != nil {
		return fail(err)
	}
	if err := p.withdraw(ctx, pl.key, obs, pl.name); err != nil {
		return fail(err)
	}
	if address == "" {
		return fail(fmt.Errorf("public IP address %s has no address although provisioned", pl.name))
	}
	p.set(pl.key, provider.LoadBalancerProgress{Served: len(pl.refused) == 0, Message: pl.servedMessage(address), Addresses: []string{address}})
	return nil
}

// withdraw deletes the key's load balancers, then its public IPs, except
// those named keep (the current ones of a load balancer still in the
// model); with keep "", the key's entry goes once all are gone.
func (p *Provider) withdraw(ctx context.Context, key string, obs observed, keep string) error {
	var lbs, pips []string
	for name, v := range obs.lbs {
		if p.owner.Key(v.Tags) == key && name != strings.ToLower(keep) {
			lbs = append(lbs, armutil.Deref(v.Name))
		}
	}
	for name, v := range obs.pips {
		if p.owner.Key(v.Tags) == key && name != strings.ToLower(keep) {
			pips = append(pips, armutil.Deref(v.Name))
		}
	}
	slices.Sort(lbs)
	slices.Sort(pips)
	if keep == "" && len(lbs)+len(pips) > 0 {
		p.message(key, "withdrawing: deleting its cross-region load balancer and public IP")
	}
	for _, name := range lbs {
		if err := remove(ctx, p, p.loadBalancerKind(), key, name, obs.lbs[strings.ToLower(name)]); err != nil {
			if keep == "" {
				p.message(key, "withdrawing: "+err.Error())
			}
			return err
		}
	}
	for _, name := range pips {
		if err := remove(ctx, p, p.publicIPKind(), key, name, obs.pips[strings.ToLower(name)]); err != nil {
			if keep == "" {
				p.message(key, "withdrawing: "+err.Error())
			}
			return err
		}
	}
	if keep == "" {
		p.drop(key)
	}
	return nil
}

// kind is what apply and remove need of one resource type.
type kind[T any] struct {
	what  string
	state func(*T) armnetwork.ProvisioningState
	tags  func(*T) map[string]*string
	// setTags sets a resource's tags.
	setTags func(T, map[string]*string) T
	// get is the resource, nil when it does not exist.
	get func(ctx context.Context, name string) (*T, error)
	// put creates or updates it and polls the operation to its end.
	put func(ctx context.Context, name string, v T) (*T, error)
	// del deletes it and polls the operation to its end.
	del func(ctx context.Context, name string) error
}

func (p *Provider) poll() *runtime.PollUntilDoneOptions {
	return &runtime.PollUntilDoneOptions{Frequency: p.cfg.PollInterval}
}

func (p *Provider) publicIPKind() kind[armnetwork.PublicIPAddress] {
	return kind[armnetwork.PublicIPAddress]{
		what: "public IP address",
		state: func(v *armnetwork.PublicIPAddress) armnetwork.ProvisioningState {
			return armutil.Deref(armutil.Deref(v.Properties).ProvisioningState)
		},
		tags: func(v *armnetwork.PublicIPAddress) map[string]*string { return v.Tags },
		setTags: func(v armnetwork.PublicIPAddress, t map[string]*string) armnetwork.PublicIPAddress {
			v.Tags = t
			return v
		},
		get: func(ctx context.Context, name string) (*armnetwork.PublicIPAddress, error) {
			r, err := p.pips.Get(ctx, p.cfg.ResourceGroup, name, nil)
			if err != nil {
				return nil, err
			}
			return &r.PublicIPAddress, nil
		},
		put: func(ctx context.Context, name string, v armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error) {
			poller, err := p.pips.BeginCreateOrUpdate(ctx, p.cfg.ResourceGroup, name, v, nil)
			if err != nil {
				return nil, err
			}
			r, err := poller.PollUntilDone(ctx, p.poll())
			if err != nil {
				return nil, err
			}
			return &r.PublicIPAddress, nil
		},
		del: func(ctx context.Context, name string) error {
			poller, err := p.pips.BeginDelete(ctx, p.cfg.ResourceGroup, name, nil)
			if err != nil {
				return err
			}
			_, err = poller.PollUntilDone(ctx, p.poll())
			return err
		},
	}
}

func (p *Provider) loadBalancerKind() kind[armnetwork.LoadBalancer] {
	return kind[armnetwork.LoadBalancer]{
		what: "load balancer",
		state: func(v *armnetwork.LoadBalancer) armnetwork.ProvisioningState {
			return armutil.Deref(armutil.Deref(v.Properties).ProvisioningState)
		},
		tags: func(v *armnetwork.LoadBalancer) map[string]*string { return v.Tags },
		setTags: func(v armnetwork.LoadBalancer, t map[string]*string) armnetwork.LoadBalancer {
			v.Tags = t
			return v
		},
		get: func(ctx context.Context, name string) (*armnetwork.LoadBalancer, error) {
			r, err := p.lbs.Get(ctx, p.cfg.ResourceGroup, name, nil)
			if err != nil {
				return nil, err
			}
			return &r.LoadBalancer, nil
		},
		put: func(ctx context.Context, name string, v armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
			poller, err := p.lbs.BeginCreateOrUpdate(ctx, p.cfg.ResourceGroup, name, v, nil)
			if err != nil {
				return nil, err
			}
			r, err := poller.PollUntilDone(ctx, p.poll())
			if err != nil {
				return nil, err
			}
			return &r.LoadBalancer, nil
		},
		del: func(ctx context.Context, name string) error {
			poller, err := p.lbs.BeginDelete(ctx, p.cfg.ResourceGroup, name, nil)
			if err != nil {
				return err
			}
			_, err = poller.PollUntilDone(ctx, p.poll())
			return err
		},
	}
}

// settle waits, polling the resource, until no operation runs on it; nil
// when it is gone.
func settle[T any](ctx context.Context, p *Provider, k kind[T], key, name string, cur *T) (*T, error) {
	start := time.Now()
	for cur != nil && armutil.Running(string(k.state(cur))) {
		what := fmt.Sprintf("waiting for %s %s: provisioningState %s (an operation already running)", k.what, name, k.state(cur))
		if err := p.waited(key, what, time.Since(start)); err != nil {
			return nil, err
		}
		if err := deployloop.Sleep(ctx, p.cfg.PollInterval); err != nil {
			return nil, err
		}
		v, err := k.get(ctx, name)
		if armerr.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", k.what, name, armerr.Describe(err))
		}
		cur = v
	}
	return cur, nil
}

// waited tells that key waits for what: past Config.WaitBound with reason
// AzureTimeout and how long (whole minutes, so that the status changes
// once a minute); past four times the bound it is an error wrapping
// context.DeadlineExceeded.
func (p *Provider) waited(key, what string, elapsed time.Duration) error {
	bound := p.cfg.WaitBound
	switch {
	case elapsed > 4*bound:
		return fmt.Errorf("%s for %s, more than the %s limit: %w", what, elapsed.Truncate(time.Minute), 4*bound, context.DeadlineExceeded)
	case elapsed > bound:
		p.failed(key, fmt.Sprintf("%s for %s, more than the %s bound; still polling", what, elapsed.Truncate(time.Minute), bound), keys.ReasonAzureTimeout)
	default:
		p.message(key, what)
	}
	return nil
}

// bounded runs an operation's f (its begin and polls) under a deadline of
// four times Config.WaitBound, telling past the bound that key waits for
// what.
func bounded[T any](ctx context.Context, p *Provider, key, what string, f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*p.cfg.WaitBound)
	defer cancel()
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(done)
		wg.Wait() // no word of waiting after the operation ended
	}()
	wg.Go(func() {
		start := time.Now()
		t := time.NewTicker(max(p.cfg.PollInterval, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if time.Since(start) > p.cfg.WaitBound {
					_ = p.waited(key, what, time.Since(start))
				}
			}
		}
	})
	return f(ctx)
}

// apply waits for an operation running on cur, then writes want when cur
// differs from it (or does not exist, or its last operation failed), and
// polls the write to its end. It returns the resource as Azure has it.
func apply[T any](ctx context.Context, p *Provider, k kind[T], key, name string, want T, cur *T, diff func(T, *T) []string) (*T, error) {
	cur, err := settle(ctx, p, k, key, name, cur)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		verb, changes := "creating", []string{}
		if cur != nil {
			verb = "updating"
			if k.state(cur) != armnetwork.ProvisioningStateSucceeded {
				changes = append(changes, fmt.Sprintf("its provisioningState is %s", k.state(cur)))
			}
			changes = append(changes, diff(want, cur)...)
			if len(changes) == 0 {
				return cur, nil
			}
			want = k.setTags(want, armutil.WithTags(k.tags(&want), k.tags(cur)))
		}
		msg := fmt.Sprintf("%s %s %s (provisioningState Updating)", verb, k.what, name)
		if len(changes) > 0 {
			msg += ": " + strings.Join(changes, ", ")
		}
		p.message(key, msg)
		p.log.Info(verb, "loadBalancer", key, "resource", k.what, "name", name, "changes", changes)
		got, err := bounded(ctx, p, key, fmt.Sprintf("%s %s %s", verb, k.what, name), func(ctx context.Context) (*T, error) { return k.put(ctx, name, want) })
		if err == nil {
			if s := k.state(got); s != armnetwork.ProvisioningStateSucceeded {
				return nil, fmt.Errorf("%s %s %s: the operation ended with provisioningState %s", verb, k.what, name, s)
			}
			return got, nil
		}
		if attempt == 0 && armerr.IsConflict(err) {
			// Someone else's operation runs: wait for it, then look again.
			v, gerr := k.get(ctx, name)
			if gerr != nil && !armerr.IsNotFound(gerr) {
				return nil, fmt.Errorf("reading %s %s: %w", k.what, name, armerr.Describe(gerr))
			}
			if cur, err = settle(ctx, p, k, key, name, v); err != nil {
				return nil, err
			}
			continue
		}
		return nil, fmt.Errorf("%s %s %s: %w", verb, k.what, name, armerr.Describe(err))
	}
}

// remove waits for an operation running on cur, deletes the resource and
// polls the deletion to its end.
func remove[T any](ctx context.Context, p *Provider, k kind[T], key, name string, cur *T) error {
	cur, err := settle(ctx, p, k, key, name, cur)
	if err != nil || cur == nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		p.message(key, fmt.Sprintf("deleting %s %s (provisioningState Deleting)", k.what, name))
		p.log.Info("deleting", "loadBalancer", key, "resource", k.what, "name", name)
		_, err := bounded(ctx, p, key, fmt.Sprintf("deleting %s %s", k.what, name), func(ctx context.Context) (struct{}, error) { return struct{}{}, k.del(ctx, name) })
		if err == nil {
			return nil
		}
		if attempt == 0 && armerr.IsConflict(err) {
			v, gerr := k.get(ctx, name)
			if armerr.IsNotFound(gerr) {
				return nil
			}
			if gerr != nil {
				return fmt.Errorf("reading %s %s: %w", k.what, name, armerr.Describe(gerr))
			}
			if v, err = settle(ctx, p, k, key, name, v); err != nil || v == nil {
				return err
			}
			continue
		}
		return fmt.Errorf("deleting %s %s: %w", k.what, name, armerr.Describe(err))
	}
}
