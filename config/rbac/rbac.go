// Package rbac embeds the agent's and the gateway's ClusterRoles, generated
// by `make generate` from the kubebuilder markers in internal/agent/app and
// internal/gateway/app.
package rbac

import (
	_ "embed"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

//go:embed role.yaml
var agentRole []byte

//go:embed gateway/role.yaml
var gatewayRole []byte

// GatewayClusterRole returns fleetnet-gateway's ClusterRole.
func GatewayClusterRole() (*rbacv1.ClusterRole, error) {
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(gatewayRole, role); err != nil {
		return nil, fmt.Errorf("decoding config/rbac/gateway/role.yaml: %w", err)
	}
	return role, nil
}

// AgentClusterRole returns the agent's ClusterRole.
func AgentClusterRole() (*rbacv1.ClusterRole, error) {
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(agentRole, role); err != nil {
		return nil, fmt.Errorf("decoding config/rbac/role.yaml: %w", err)
	}
	return role, nil
}
