package frontdoor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/fleetnet/fleetnet/internal/azure/armerr"
)

// TokenStore keeps, per Gateway ("namespace/name"), the resume tokens of
// the long-running operations running on its resources, by operation key
// (see opKey). fleetnet-gateway keeps them in the Gateway's
// keys.AnnotationAzureOperations annotation.
type TokenStore interface {
	Load(ctx context.Context, gateway string) (map[string]string, error)
	Save(ctx context.Context, gateway string, tokens map[string]string) error
}

// MemoryTokens is a TokenStore in memory: the reference implementation,
// and what a provider without a store uses (tokens die with the process).
type MemoryTokens struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

var _ TokenStore = (*MemoryTokens)(nil)

// Load returns a copy of gateway's tokens.
func (t *MemoryTokens) Load(_ context.Context, gateway string) (map[string]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.m[gateway]), nil
}

// Save replaces gateway's tokens.
func (t *MemoryTokens) Save(_ context.Context, gateway string, tokens map[string]string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]map[string]string{}
	}
	if len(tokens) == 0 {
		delete(t.m, gateway)
		return nil
	}
	t.m[gateway] = maps.Clone(tokens)
	return nil
}

// opKey names an operation: verb (put or delete), kind and path, e.g.
// "put|route|fn-web-1/fn-2/fn-home-3".
func opKey(verb, kind string, path []string) string {
	return verb + "|" + kind + "|" + strings.Join(path, "/")
}

func parseOpKey(k string) (verb, kind string, path []string, err error) {
	parts := strings.Split(k, "|")
	if len(parts) != 3 || (parts[0] != "put" && parts[0] != "delete") || parts[2] == "" {
		return "", "", nil, fmt.Errorf("operation key %q: want put|delete, a kind and a path", k)
	}
	return parts[0], parts[1], strings.Split(parts[2], "/"), nil
}

// track records and forgets the resume tokens of one Gateway's running
// operations in the store.
func (p *Provider) track(ctx context.Context, gateway, key, token string) {
	tokens, err := p.cfg.Tokens.Load(ctx, gateway)
	if err != nil {
		p.log.Info("cannot read the operations' resume tokens; an operation running at a restart is waited for through its provisioningState", "gateway", gateway, "err", err)
		return
	}
	if tokens == nil {
		tokens = map[string]string{}
	}
	if token == "" {
		if _, ok := tokens[key]; !ok {
			return
		}
		delete(tokens, key)
	} else {
		tokens[key] = token
	}
	if err := p.cfg.Tokens.Save(ctx, gateway, tokens); err != nil {
		p.log.Info("cannot keep the operations' resume tokens; an operation running at a restart is waited for through its provisioningState", "gateway", gateway, "err", err)
	}
}

// resume polls to their end the operations a previous process started
// on gateway's resources, before anything is observed.
func (p *Provider) resume(ctx context.Context, gateway string) {
	tokens, err := p.cfg.Tokens.Load(ctx, gateway)
	if err != nil || len(tokens) == 0 {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(tokens)) {
		verb, kind, path, perr := parseOpKey(k)
		o, ok := p.kinds[kind]
		if perr != nil || !ok {
			p.log.Info("dropping an unreadable operation key", "gateway", gateway, "key", k)
			p.track(ctx, gateway, k, "")
			continue
		}
		p.setMessage(gateway, fmt.Sprintf("resuming the %s of %s %s started before a restart", verb, kind, path[len(path)-1]))
		p.log.Info("resuming operation", "gateway", gateway, "operation", verb, "resource", kind, "name", path[len(path)-1])
		if verb == "put" {
			_, err = o.put(ctx, path, nil, tokens[k], nil)
		} else {
			err = o.del(ctx, path, tokens[k], nil)
		}
		if err != nil && ctx.Err() != nil {
			return
		}
		if err != nil && !armerr.IsNotFound(err) {
			p.log.Info("a resumed operation did not succeed; the resource is written again if it differs", "gateway", gateway, "key", k, "err", armerr.Describe(err))
		}
		p.track(ctx, gateway, k, "")
	}
}
