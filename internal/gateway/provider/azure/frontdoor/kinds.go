package frontdoor

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
)

// Kinds of Front Door resources, in the order they are created; deletion
// goes the other way (see withdrawOrder).
const (
	kindProfile      = "profile"
	kindEndpoint     = "endpoint"
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
	put  func(ctx context.Context, path []string, v any, resume string, started func(string)) (any, error)
	del  func(ctx context.Context, path []string, resume string, started func(string)) error
}

// poll runs a poller to its end, telling its resume token first.
func poll[R any](ctx context.Context, p *runtime.Poller[R], started func(string), every time.Duration) (R, error) {
	if !p.Done() {
		if tok, err := p.ResumeToken(); err == nil && started != nil {
			started(tok)
		}
	}
	return p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: every})
}

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

// kinds builds the ops of every kind on f's clients.
func kinds(f *armcdn.ClientFactory, rg string, every time.Duration) map[string]ops {
	profiles, endpoints, groups, origins := f.NewProfilesClient(), f.NewAFDEndpointsClient(), f.NewAFDOriginGroupsClient(), f.NewAFDOriginsClient()
	ruleSets, rules, routes, policies, domains := f.NewRuleSetsClient(), f.NewRulesClient(), f.NewRoutesClient(), f.NewSecurityPoliciesClient(), f.NewAFDCustomDomainsClient()
	return map[string]ops{
		kindProfile: {
			get: func(ctx context.Context, p []string) (any, error) {
				r, err := profiles.Get(ctx, rg, p[0], nil)
				return &r.Profile, err
			},
			list: func(ctx context.Context, _ []string) ([]any, error) {
				return pages(ctx, profiles.NewListByResourceGroupPager(rg, nil), func(r armcdn.ProfilesClientListByResourceGroupResponse) []*armcdn.Profile { return r.Value })
			},
			put: func(ctx context.Context, p []string, v any, resume string, started func(string)) (any, error) {
				pl, err := profiles.BeginCreate(ctx, rg, p[0], deref(as[armcdn.Profile](v)), &armcdn.ProfilesClientBeginCreateOptions{ResumeToken: resume})
				if err != nil {
					return nil, err
				}
				r, err := poll(ctx, pl, started, every)
				return &r.Profile, err
			},
			del: func(ctx context.Context, p []string, resume string, started func(string)) error {
				pl, err := profiles.BeginDelete(ctx, rg, p[0], &armcdn.ProfilesClientBeginDeleteOptions{ResumeToken: resume})
				if err != nil {
					return err
				}
				_, err = poll(ctx, pl, started, every)
				return err
			},
		},
		kindEndpoint: {
			get: func(ctx context.Context, p []string) (any, error) {
				r, err := endpoints.Get(ctx, rg, p[0], p[1], nil)
				return &r.AFDEndpoint, err
			},
			list: func(ctx context.Context, p []string) ([]any, error) {
				return pages(ctx, endpoints.NewListByProfilePager(rg, p[0], nil), func(r armcdn.AFDEndpointsClientListByProfileResponse) []*armcdn.AFDEndpoint { return r.Value })
			},
			put: func(ctx context.Context, p []string, v any, resume string, started func(string)) (any, error) {
				pl, err := endpoints.BeginCreate(ctx, rg, p[0], p[1], deref(as[armcdn.AFDEndpoint](v)), &armcdn.AFDEndpointsClientBeginCreateOptions{ResumeToken: resume})
				if err != nil {
					return nil, err
				}
				r, err := poll(ctx, pl, started, every)
				return &r.AFDEndpoint, err
			},
			del: func(ctx context.Context, p []string, resume string, started func(string)) error {
				pl, err := endpoints.BeginDelete(ctx, rg, p[0], p[1], &armcdn.AFDEndpointsClientBeginDeleteOptions{ResumeToken: resume})
				if err != nil {
					return err
				}
				_, err = poll(ctx, pl, started, every)
				return err
			},
		},
		kindDomain: {
			get: func(ctx context.Context, p []string) (any, error) {
				r, err := domains.Get(ctx, rg, p[0], p[1], nil)
				return &r.AFDDomain, err
			},
			list: func(ctx context.Context, p []string) ([]any, error) {
				return pages(ctx, domains.NewListByProfilePager(rg, p[0], nil), func(r armcdn.AFDCustomDomainsClientListByProfileResponse) []*armcdn.AFDDomain { return r.Value })
			},
			put: func(ctx context.Context, p []string, v any, resume string, started func(string)) (any, error) {
				pl, err := domains.BeginCreate(ctx, rg, p[0], p[1], deref(as[armcdn.AFDDomain](v)), &armcdn.AFDCustomDomainsClientBeginCreateOptions{ResumeToken: resume})
				if err != nil {
					return nil, err
				}
				r, err := poll(ctx, pl, started, every)
				return &r.AFDDomain, err
			},
			del: func(ctx context.Context, p []string, resume string, started func(string)) error {
				pl, err := domains.BeginDelete(ctx, rg, p[0], p[1], &armcdn.AFDCustomDomainsClientBeginDeleteOptions{ResumeToken: resume})
				if err != nil {
					return err
				}
				_, err = poll(ctx, pl, started, every)
				return err
			},
		},
		kindOriginGroup: {
			get: func(ctx context.Context, p []string) (any, error) {
				r, err := groups.Get(ctx, rg, p[0], p[1], nil)
				return &r.AFDOriginGroup, err
			},
			list: func(ctx context.Context, p []string) ([]any, error) {
				return pages(ctx, groups.NewListByProfilePager(rg, p[0], nil), func(r armcdn.AFDOriginGroupsClientListByProfileResponse) []*armcdn.AFDOriginGroup { return r.Value })
			},
			put: func(ctx context.Context, p []string, v any, resume string, started func(string)) (any, error) {
				pl, err := groups.BeginCreate(ctx, rg, p[0], p[1], deref(as[armcdn.AFDOriginGroup](v)), &armcdn.AFDOriginGroupsClientBeginCreateOptions{ResumeToken: resume})
				if err != nil {
					return nil, err
				}
				r, err := poll(ctx, pl, started, every)
				return &r.AFDOriginGroup, err
			},
			del: func(ctx context.Context, p []string, resume string, started func(string)) error {
				pl, err := groups.BeginDelete(ctx, rg, p[0], p[1], &armcdn.AFDOriginGroupsClientBeginDeleteOptions{ResumeToken: resume})
				if err != nil {
					return err
				}
				_, err = poll(ctx, pl, started, every)
				return err
			},
		},
		kindOrigin: {
			get: func(ctx context.Context, p []string) (any, error) {
				r, err := origins.Get(ctx, rg, p[0], p[1], p[2], nil)
				return &r.AFDOrigin, err
			},
			list: func(ctx context.Context, p []string) ([]any, error) {
				return pages(ctx, origins.NewListByOriginGroupPager(rg, p[0], p[1], nil), func(r armcdn.AFDOriginsClientListByOriginGroupResponse) []*armcdn.AFDOrigin { return r.Value })
			},
			put: func(ctx context.Context, p []string, v any, resume string, started func(string)) (any, error) {
				pl, err := origins.BeginCreate(ctx, rg, p[0], p[1], p[2], deref(as[armcdn.AFDOrigin](v)), &armcdn.AFDOriginsClientBeginCreateOptions{ResumeToken: resume})
				if err != nil {
					return nil, err
				}
				r, err := poll(ctx, pl, started, every)
				return &r.AFDOrigin, err
			},
			del: func(ctx context.Context, p []string, resume string, started func(string)) error {
				pl, err := origins.BeginDelete(ctx, rg, p[0], p[1], p[2], &armcdn.AFDOriginsClientBeginDeleteOptions{ResumeToken: resume})
				if err != nil {
					return err
				}
				_, err = poll(ctx, pl, started, every)
				return err
			},
		},
		kindRuleSet: {
			get: func(ctx context.Context, p []string) (any, error) {
				r, err := ruleSets.Get(ctx, rg, p[0], p[1], nil)
				return &r.RuleSet, err
			},
			list: func(ctx context.Context, p []string) ([]any, error) {
				return pages(ctx, ruleSets.NewListByProfilePager(rg, p[0], nil), func(r armcdn.RuleSetsClientListByProfileResponse) []*armcdn.RuleSet { return r.Value })
			},
			// A rule set's create is synchronous and has no body.
			put: func(ctx context.Context, p []string, _ any, _ string, _ func(string)) (any, error) {
				r, err := ruleSets.Create(ctx, rg, p[0], p[1], nil)
				return &r.RuleSet, err
			},
			del: func(ctx context.Context, p []string, resume string, started func(string)) error {
				pl, err := ruleSets.BeginDelete(ctx, rg, p[0], p[1], &armcdn.RuleSetsClientBeginDeleteOptions{ResumeToken: resume})
				if err != nil {
					return err
				}
				_, err = poll(ctx, pl, started, every)
				return err
			},
		},
		kindRule: {
			get: func(ctx context.Context, p []string) (any, error) {
				r, err := rules.Get(ctx, rg, p[0], p[1], p[2], nil)
				return &r.Rule, err
			},
			list: func(ctx context.Context, p []string) ([]any, error) {
				return pages(ctx, rules.NewListByRuleSetPager(rg, p[0], p[1], nil), func(r armcdn.RulesClientListByRuleSetResponse) []*armcdn.Rule { return r.Value })
			},
			put: func(ctx context.Context, p []string, v any, resume string, started func(string)) (any, error) {
				pl, err := rules.BeginCreate(ctx, rg, p[0], p[1], p[2], deref(as[armcdn.Rule](v)), &armcdn.RulesClientBeginCreateOptions{ResumeToken: resume})
				if err != nil {
					return nil, err
				}
				r, err := poll(ctx, pl, started, every)
				return &r.Rule, err
			},
			del: func(ctx context.Context, p []string, resume string, started func(string)) error {
				pl, err := rules.BeginDelete(ctx, rg, p[0], p[1], p[2], &armcdn.RulesClientBeginDeleteOptions{ResumeToken: resume})
				if err != nil {
					return err
				}
				_, err = poll(ctx, pl, started, every)
				return err
			},
		},
		kindRoute: {
			get: func(ctx context.Context, p []string) (any, error) {
				r, err := routes.Get(ctx, rg, p[0], p[1], p[2], nil)
				return &r.Route, err
			},
			list: func(ctx context.Context, p []string) ([]any, error) {
				return pages(ctx, routes.NewListByEndpointPager(rg, p[0], p[1], nil), func(r armcdn.RoutesClientListByEndpointResponse) []*armcdn.Route { return r.Value })
			},
			put: func(ctx context.Context, p []string, v any, resume string, started func(string)) (any, error) {
				pl, err := routes.BeginCreate(ctx, rg, p[0], p[1], p[2], deref(as[armcdn.Route](v)), &armcdn.RoutesClientBeginCreateOptions{ResumeToken: resume})
				if err != nil {
					return nil, err
				}
				r, err := poll(ctx, pl, started, every)
				return &r.Route, err
			},
			del: func(ctx context.Context, p []string, resume string, started func(string)) error {
				pl, err := routes.BeginDelete(ctx, rg, p[0], p[1], p[2], &armcdn.RoutesClientBeginDeleteOptions{ResumeToken: resume})
				if err != nil {
					return err
				}
				_, err = poll(ctx, pl, started, every)
				return err
			},
		},
		kindSecurity: {
			get: func(ctx context.Context, p []string) (any, error) {
				r, err := policies.Get(ctx, rg, p[0], p[1], nil)
				return &r.SecurityPolicy, err
			},
			list: func(ctx context.Context, p []string) ([]any, error) {
				return pages(ctx, policies.NewListByProfilePager(rg, p[0], nil), func(r armcdn.SecurityPoliciesClientListByProfileResponse) []*armcdn.SecurityPolicy { return r.Value })
			},
			put: func(ctx context.Context, p []string, v any, resume string, started func(string)) (any, error) {
				pl, err := policies.BeginCreate(ctx, rg, p[0], p[1], deref(as[armcdn.SecurityPolicy](v)), &armcdn.SecurityPoliciesClientBeginCreateOptions{ResumeToken: resume})
				if err != nil {
					return nil, err
				}
				r, err := poll(ctx, pl, started, every)
				return &r.SecurityPolicy, err
			},
			del: func(ctx context.Context, p []string, resume string, started func(string)) error {
				pl, err := policies.BeginDelete(ctx, rg, p[0], p[1], &armcdn.SecurityPoliciesClientBeginDeleteOptions{ResumeToken: resume})
				if err != nil {
					return err
				}
				_, err = poll(ctx, pl, started, every)
				return err
			},
		},
	}
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// as is v as a *T, nil when v is not one (a resumed operation has no
// body).
func as[T any](v any) *T {
	t, _ := v.(*T)
	return t
}
