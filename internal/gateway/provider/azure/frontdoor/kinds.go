package frontdoor

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
	"k8s.io/utils/clock"

	"github.com/fleetnet/fleetnet/internal/azure/armutil"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/deployloop"
)

// Kinds of Front Door resources, in the order they are created; deletion
// goes the other way (see withdrawOrder).
const (
	kindProfile      = "profile"
	kindEndpoint     = "endpoint"
	kindSecret       = "secret"
	kindDomain       = "custom domain"
	kindOriginGroup  = "origin group"
	kindOrigin       = "origin"
	kindRuleSet      = "rule set"
	kindRule         = "rule"
	kindRoute        = "route"
	kindSecurity     = "security policy"
	defaultPollEvery = 10 * time.Second
)

// ops are the SDK calls of one kind behind one shape: path is the names
// below the resource group ([profile], [profile, endpoint, route]...);
// values are the SDK's model types (armcdn.Route...) as any. started is
// called with the resume token of a long-running operation as soon as it
// is accepted, so that a restarted controller resumes it.
type ops struct {
	get  func(ctx context.Context, path []string) (any, error)
	list func(ctx context.Context, parent []string) ([]any, error)
	put  func(ctx context.Context, path []string, v any, resume string, started *opTrack) (any, error)
	del  func(ctx context.Context, path []string, resume string, started *opTrack) error
}

// kinds builds the ops of every kind on f's clients, in resource group
// rg, polling long-running operations every every for at most limit.
func kinds(f *armcdn.ClientFactory, rg string, every, limit time.Duration, clk clock.PassiveClock) map[string]ops {
	c := calls{rg: rg, every: every, limit: limit, clock: clk}
	return map[string]ops{
		kindProfile:     c.profiles(f.NewProfilesClient()),
		kindEndpoint:    c.endpoints(f.NewAFDEndpointsClient()),
		kindSecret:      c.secrets(f.NewSecretsClient()),
		kindDomain:      c.domains(f.NewAFDCustomDomainsClient()),
		kindOriginGroup: c.originGroups(f.NewAFDOriginGroupsClient()),
		kindOrigin:      c.origins(f.NewAFDOriginsClient()),
		kindRuleSet:     c.ruleSets(f.NewRuleSetsClient()),
		kindRule:        c.rules(f.NewRulesClient()),
		kindRoute:       c.routes(f.NewRoutesClient()),
		kindSecurity:    c.securityPolicies(f.NewSecurityPoliciesClient()),
	}
}

// calls adapts each kind's SDK client to ops: a method per kind, which
// spreads the path over the client's parameters.
type calls struct {
	rg    string
	every time.Duration
	// limit is how long an operation is polled before await gives up;
	// clock measures it.
	limit time.Duration
	clock clock.PassiveClock
}

// opTrack is told about a long-running operation: its resume token as
// soon as Azure accepted it, and after every poll how long it has run.
type opTrack struct {
	started func(token string)
	running func(elapsed time.Duration)
}

// await polls an operation begun (unless begin failed: err) to its end,
// telling t its resume token first and how long it runs after each poll.
// Past c.limit it stops polling with an error wrapping
// context.DeadlineExceeded: the operation goes on in Azure, and the next
// deployment resumes it (its token is kept) or waits for it.
func await[R any](ctx context.Context, c calls, p *runtime.Poller[R], err error, t *opTrack) (R, error) {
	var zero R
	if err != nil {
		return zero, err
	}
	if !p.Done() && t != nil && t.started != nil {
		if tok, err := p.ResumeToken(); err == nil {
			t.started(tok)
		}
	}
	start := c.clock.Now()
	for !p.Done() {
		if err := deployloop.Sleep(ctx, c.every); err != nil {
			return zero, err
		}
		if _, err := p.Poll(ctx); err != nil {
			return zero, err
		}
		elapsed := c.clock.Since(start)
		if t != nil && t.running != nil && !p.Done() {
			t.running(elapsed)
		}
		if !p.Done() && elapsed > c.limit {
			return zero, fmt.Errorf("the operation has run for %s, more than the %s limit: %w", elapsed.Round(time.Second), c.limit, context.DeadlineExceeded)
		}
	}
	return p.Result(ctx)
}

// pages reads every page of a list.
func pages[T, R any](ctx context.Context, pager *runtime.Pager[R], values func(R) []*T) ([]any, error) {
	var out []any
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, v := range values(page) {
			out = append(out, v)
		}
	}
	return out, nil
}

// body is v as the body of a write, the zero T for a resumed operation
// (which has none).
func body[T any](v any) T {
	t, _ := v.(*T)
	return armutil.Deref(t)
}

func (c calls) profiles(cl *armcdn.ProfilesClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], nil)
			return &r.Profile, err
		},
		list: func(ctx context.Context, _ []string) ([]any, error) {
			return pages(ctx, cl.NewListByResourceGroupPager(c.rg, nil), func(r armcdn.ProfilesClientListByResourceGroupResponse) []*armcdn.Profile { return r.Value })
		},
		put: func(ctx context.Context, p []string, v any, resume string, started *opTrack) (any, error) {
			pl, err := cl.BeginCreate(ctx, c.rg, p[0], body[armcdn.Profile](v), &armcdn.ProfilesClientBeginCreateOptions{ResumeToken: resume})
			r, err := await(ctx, c, pl, err, started)
			return &r.Profile, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], &armcdn.ProfilesClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}

func (c calls) endpoints(cl *armcdn.AFDEndpointsClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], p[1], nil)
			return &r.AFDEndpoint, err
		},
		list: func(ctx context.Context, p []string) ([]any, error) {
			return pages(ctx, cl.NewListByProfilePager(c.rg, p[0], nil), func(r armcdn.AFDEndpointsClientListByProfileResponse) []*armcdn.AFDEndpoint { return r.Value })
		},
		put: func(ctx context.Context, p []string, v any, resume string, started *opTrack) (any, error) {
			pl, err := cl.BeginCreate(ctx, c.rg, p[0], p[1], body[armcdn.AFDEndpoint](v), &armcdn.AFDEndpointsClientBeginCreateOptions{ResumeToken: resume})
			r, err := await(ctx, c, pl, err, started)
			return &r.AFDEndpoint, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], p[1], &armcdn.AFDEndpointsClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}

func (c calls) secrets(cl *armcdn.SecretsClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], p[1], nil)
			return &r.Secret, err
		},
		list: func(ctx context.Context, p []string) ([]any, error) {
			return pages(ctx, cl.NewListByProfilePager(c.rg, p[0], nil), func(r armcdn.SecretsClientListByProfileResponse) []*armcdn.Secret { return r.Value })
		},
		put: func(ctx context.Context, p []string, v any, resume string, started *opTrack) (any, error) {
			pl, err := cl.BeginCreate(ctx, c.rg, p[0], p[1], body[armcdn.Secret](v), &armcdn.SecretsClientBeginCreateOptions{ResumeToken: resume})
			r, err := await(ctx, c, pl, err, started)
			return &r.Secret, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], p[1], &armcdn.SecretsClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}

func (c calls) domains(cl *armcdn.AFDCustomDomainsClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], p[1], nil)
			return &r.AFDDomain, err
		},
		list: func(ctx context.Context, p []string) ([]any, error) {
			return pages(ctx, cl.NewListByProfilePager(c.rg, p[0], nil), func(r armcdn.AFDCustomDomainsClientListByProfileResponse) []*armcdn.AFDDomain { return r.Value })
		},
		put: func(ctx context.Context, p []string, v any, resume string, started *opTrack) (any, error) {
			pl, err := cl.BeginCreate(ctx, c.rg, p[0], p[1], body[armcdn.AFDDomain](v), &armcdn.AFDCustomDomainsClientBeginCreateOptions{ResumeToken: resume})
			r, err := await(ctx, c, pl, err, started)
			return &r.AFDDomain, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], p[1], &armcdn.AFDCustomDomainsClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}

func (c calls) originGroups(cl *armcdn.AFDOriginGroupsClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], p[1], nil)
			return &r.AFDOriginGroup, err
		},
		list: func(ctx context.Context, p []string) ([]any, error) {
			return pages(ctx, cl.NewListByProfilePager(c.rg, p[0], nil), func(r armcdn.AFDOriginGroupsClientListByProfileResponse) []*armcdn.AFDOriginGroup { return r.Value })
		},
		put: func(ctx context.Context, p []string, v any, resume string, started *opTrack) (any, error) {
			pl, err := cl.BeginCreate(ctx, c.rg, p[0], p[1], body[armcdn.AFDOriginGroup](v), &armcdn.AFDOriginGroupsClientBeginCreateOptions{ResumeToken: resume})
			r, err := await(ctx, c, pl, err, started)
			return &r.AFDOriginGroup, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], p[1], &armcdn.AFDOriginGroupsClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}

func (c calls) origins(cl *armcdn.AFDOriginsClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], p[1], p[2], nil)
			return &r.AFDOrigin, err
		},
		list: func(ctx context.Context, p []string) ([]any, error) {
			return pages(ctx, cl.NewListByOriginGroupPager(c.rg, p[0], p[1], nil), func(r armcdn.AFDOriginsClientListByOriginGroupResponse) []*armcdn.AFDOrigin { return r.Value })
		},
		put: func(ctx context.Context, p []string, v any, resume string, started *opTrack) (any, error) {
			pl, err := cl.BeginCreate(ctx, c.rg, p[0], p[1], p[2], body[armcdn.AFDOrigin](v), &armcdn.AFDOriginsClientBeginCreateOptions{ResumeToken: resume})
			r, err := await(ctx, c, pl, err, started)
			return &r.AFDOrigin, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], p[1], p[2], &armcdn.AFDOriginsClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}

func (c calls) ruleSets(cl *armcdn.RuleSetsClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], p[1], nil)
			return &r.RuleSet, err
		},
		list: func(ctx context.Context, p []string) ([]any, error) {
			return pages(ctx, cl.NewListByProfilePager(c.rg, p[0], nil), func(r armcdn.RuleSetsClientListByProfileResponse) []*armcdn.RuleSet { return r.Value })
		},
		// A rule set's create is synchronous and has no body.
		put: func(ctx context.Context, p []string, _ any, _ string, _ *opTrack) (any, error) {
			r, err := cl.Create(ctx, c.rg, p[0], p[1], nil)
			return &r.RuleSet, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], p[1], &armcdn.RuleSetsClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}

func (c calls) rules(cl *armcdn.RulesClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], p[1], p[2], nil)
			return &r.Rule, err
		},
		list: func(ctx context.Context, p []string) ([]any, error) {
			return pages(ctx, cl.NewListByRuleSetPager(c.rg, p[0], p[1], nil), func(r armcdn.RulesClientListByRuleSetResponse) []*armcdn.Rule { return r.Value })
		},
		put: func(ctx context.Context, p []string, v any, resume string, started *opTrack) (any, error) {
			pl, err := cl.BeginCreate(ctx, c.rg, p[0], p[1], p[2], body[armcdn.Rule](v), &armcdn.RulesClientBeginCreateOptions{ResumeToken: resume})
			r, err := await(ctx, c, pl, err, started)
			return &r.Rule, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], p[1], p[2], &armcdn.RulesClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}

func (c calls) routes(cl *armcdn.RoutesClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], p[1], p[2], nil)
			return &r.Route, err
		},
		list: func(ctx context.Context, p []string) ([]any, error) {
			return pages(ctx, cl.NewListByEndpointPager(c.rg, p[0], p[1], nil), func(r armcdn.RoutesClientListByEndpointResponse) []*armcdn.Route { return r.Value })
		},
		put: func(ctx context.Context, p []string, v any, resume string, started *opTrack) (any, error) {
			pl, err := cl.BeginCreate(ctx, c.rg, p[0], p[1], p[2], body[armcdn.Route](v), &armcdn.RoutesClientBeginCreateOptions{ResumeToken: resume})
			r, err := await(ctx, c, pl, err, started)
			return &r.Route, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], p[1], p[2], &armcdn.RoutesClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}

func (c calls) securityPolicies(cl *armcdn.SecurityPoliciesClient) ops {
	return ops{
		get: func(ctx context.Context, p []string) (any, error) {
			r, err := cl.Get(ctx, c.rg, p[0], p[1], nil)
			return &r.SecurityPolicy, err
		},
		list: func(ctx context.Context, p []string) ([]any, error) {
			return pages(ctx, cl.NewListByProfilePager(c.rg, p[0], nil), func(r armcdn.SecurityPoliciesClientListByProfileResponse) []*armcdn.SecurityPolicy { return r.Value })
		},
		put: func(ctx context.Context, p []string, v any, resume string, started *opTrack) (any, error) {
			pl, err := cl.BeginCreate(ctx, c.rg, p[0], p[1], body[armcdn.SecurityPolicy](v), &armcdn.SecurityPoliciesClientBeginCreateOptions{ResumeToken: resume})
			r, err := await(ctx, c, pl, err, started)
			return &r.SecurityPolicy, err
		},
		del: func(ctx context.Context, p []string, resume string, started *opTrack) error {
			pl, err := cl.BeginDelete(ctx, c.rg, p[0], p[1], &armcdn.SecurityPoliciesClientBeginDeleteOptions{ResumeToken: resume})
			_, err = await(ctx, c, pl, err, started)
			return err
		},
	}
}
