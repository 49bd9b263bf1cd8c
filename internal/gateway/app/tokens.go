package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor"
)

// AnnotationTokens keeps the Front Door provider's resume tokens in the
// Gateway's keys.AnnotationAzureOperations annotation (JSON, by
// operation), so that a restarted or newly elected controller resumes
// the operations that were running.
type AnnotationTokens struct {
	Client client.Client
}

var _ frontdoor.TokenStore = (*AnnotationTokens)(nil)

func gatewayKey(gateway string) types.NamespacedName {
	ns, name, _ := strings.Cut(gateway, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}

// Load reads the tokens; a Gateway that is gone has none.
func (a *AnnotationTokens) Load(ctx context.Context, gateway string) (map[string]string, error) {
	gw := &gwv1.Gateway{}
	if err := a.Client.Get(ctx, gatewayKey(gateway), gw); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	v := gw.Annotations[keys.AnnotationAzureOperations]
	if v == "" {
		return nil, nil
	}
	out := map[string]string{}
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("annotation %s of Gateway %s: %w", keys.AnnotationAzureOperations, gateway, err)
	}
	return out, nil
}

// Save writes the tokens with a merge patch of the one annotation (none
// removes it); a Gateway that is gone keeps nothing.
func (a *AnnotationTokens) Save(ctx context.Context, gateway string, tokens map[string]string) error {
	var value any
	if len(tokens) > 0 {
		b, err := json.Marshal(tokens)
		if err != nil {
			return err
		}
		value = string(b)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{keys.AnnotationAzureOperations: value}}})
	if err != nil {
		return err
	}
	gw := &gwv1.Gateway{}
	gw.Namespace, gw.Name = gatewayKey(gateway).Namespace, gatewayKey(gateway).Name
	if err := a.Client.Patch(ctx, gw, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(keys.FieldManagerGateway)); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}
