package afde2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/frontdoor/armfrontdoor"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetnet/fleetnet/api/keys"
)

// API versions of the requests made without an SDK module.
const (
	resourceGroupsAPI  = "2021-04-01" // https://learn.microsoft.com/rest/api/resources/resource-groups
	roleAssignmentsAPI = "2022-04-01" // https://learn.microsoft.com/rest/api/authorization/role-assignments/create
)

// Setup creates the resource group (tagged when it creates it), the WAF
// policy with the test rule, prints (and with AssignRoles makes) the
// gateway identity's role assignments, gives the gateway its flags
// (ConfigureGateway) and applies the GatewayClass, Gateway and HTTPRoute.
func Setup(ctx context.Context, c Config) error {
	r, err := newRun(c)
	if err != nil {
		return err
	}
	if err := r.ensureGroup(ctx); err != nil {
		return err
	}
	if err := r.ensureWAF(ctx); err != nil {
		return err
	}
	if err := r.roles(ctx); err != nil {
		return err
	}
	if r.ConfigureGateway != nil {
		args := []string{"--azure-subscription-id=" + r.SubscriptionID, "--azure-resource-group=" + r.ResourceGroup,
			"--azure-location=" + r.Location, "--azure-front-door-classes=" + r.Class() + "=" + r.Tier}
		if err := r.ConfigureGateway(ctx, args); err != nil {
			return fmt.Errorf("configuring fleetnet-gateway: %w", err)
		}
	}
	return r.applyObjects(ctx)
}

func (r *run) ensureGroup(ctx context.Context) error {
	path := r.groupID()
	status, err := r.armDo(ctx, http.MethodHead, path, resourceGroupsAPI, nil, nil, http.StatusNoContent, http.StatusNotFound)
	if err != nil {
		return fmt.Errorf("checking resource group %s: %w", r.ResourceGroup, err)
	}
	if status == http.StatusNoContent {
		r.logf("resource group %s exists", r.ResourceGroup)
		return nil
	}
	body := map[string]any{"location": r.Location, "tags": map[string]string{"fleetnet-e2e": "created"}}
	if _, err := r.armDo(ctx, http.MethodPut, path, resourceGroupsAPI, body, nil, http.StatusOK, http.StatusCreated); err != nil {
		return fmt.Errorf("creating resource group %s: %w", r.ResourceGroup, err)
	}
	r.logf("created resource group %s in %s", r.ResourceGroup, r.Location)
	return nil
}

// ensureWAF creates (or updates) the WAF policy: Prevention mode, one
// custom rule blocking requests with BlockHeader: BlockValue. Its tier is
// the profile's (a Front Door security policy needs the same one).
func (r *run) ensureWAF(ctx context.Context) error {
	sku := armfrontdoor.SKUNameStandardAzureFrontDoor
	if r.Tier == "Premium" {
		sku = armfrontdoor.SKUNamePremiumAzureFrontDoor
	}
	p := armfrontdoor.WebApplicationFirewallPolicy{Location: to.Ptr("Global"), SKU: &armfrontdoor.SKU{Name: to.Ptr(sku)},
		Properties: &armfrontdoor.WebApplicationFirewallPolicyProperties{
			PolicySettings: &armfrontdoor.PolicySettings{EnabledState: to.Ptr(armfrontdoor.PolicyEnabledStateEnabled), Mode: to.Ptr(armfrontdoor.PolicyModePrevention)},
			CustomRules: &armfrontdoor.CustomRuleList{Rules: []*armfrontdoor.CustomRule{{
				Name: to.Ptr("fleetnete2eblock"), Priority: to.Ptr[int32](10), RuleType: to.Ptr(armfrontdoor.RuleTypeMatchRule),
				EnabledState: to.Ptr(armfrontdoor.CustomRuleEnabledStateEnabled), Action: to.Ptr(armfrontdoor.ActionTypeBlock),
				MatchConditions: []*armfrontdoor.MatchCondition{{MatchVariable: to.Ptr(armfrontdoor.MatchVariableRequestHeader),
					Selector: to.Ptr(BlockHeader), Operator: to.Ptr(armfrontdoor.OperatorEqual), MatchValue: []*string{to.Ptr(BlockValue)},
					Transforms: []*armfrontdoor.TransformType{to.Ptr(armfrontdoor.TransformTypeLowercase)}}},
			}}},
		}}
	poller, err := r.waf.BeginCreateOrUpdate(ctx, r.ResourceGroup, WAFPolicyName, p, nil)
	if err != nil {
		return fmt.Errorf("creating WAF policy %s: %w", WAFPolicyName, err)
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: r.PollEvery}); err != nil {
		return fmt.Errorf("creating WAF policy %s: %w", WAFPolicyName, err)
	}
	r.logf("WAF policy %s (%s, Prevention) blocks requests with %s: %s", WAFPolicyName, sku, BlockHeader, BlockValue)
	return nil
}

// Built-in role definitions the gateway's identity needs, from Azure's
// list of built-in roles
// (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles):
const (
	// roleCDNProfileContributor "can manage CDN and Azure Front Door
	// standard and premium profiles and their endpoints"
	// (Microsoft.Cdn/profiles/*): every Front Door resource the provider
	// writes is a profile or a child of one.
	roleCDNProfileContributor = "ec156ff8-a8d1-4d15-830c-5b80698ca432"
	// roleReader reads the member clusters' load balancers, public IP
	// addresses and Private Link Services (the origins), and the WAF
	// policy a security policy refers to.
	roleReader = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
	// roleNetworkContributor includes
	// Microsoft.Network/privateLinkServices/privateEndpointConnections/write,
	// which approving Front Door's Private Link connection is
	// (https://learn.microsoft.com/rest/api/virtualnetwork/private-link-services/update-private-endpoint-connection).
	roleNetworkContributor = "4d97b98b-1d4f-4787-a291-c67834d212e7"
)

// Assignment is one role assignment the gateway's identity needs.
type Assignment struct {
	Role, RoleName, Scope, Why string
}

// Assignments are the role assignments of the gateway's identity for c.
func Assignments(c Config) []Assignment {
	group := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s", c.SubscriptionID, c.ResourceGroup)
	out := []Assignment{
		{roleCDNProfileContributor, "CDN Profile Contributor", group, "create, change and delete the Front Door profiles and their children"},
		{roleReader, "Reader", group + "/providers/Microsoft.Network/FrontDoorWebApplicationFirewallPolicies/" + WAFPolicyName,
			"refer to the WAF policy from the security policy (ARM checks read access to a referenced resource)"},
	}
	for _, g := range c.MemberResourceGroups {
		sub, name, ok := strings.Cut(g, "/")
		if !ok {
			sub, name = c.SubscriptionID, g
		}
		scope := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s", sub, name)
		if c.Connectivity == "private-link" {
			out = append(out, Assignment{roleNetworkContributor, "Network Contributor", scope,
				"read the cluster's internal load balancer and approve Front Door's connection on its Private Link Service"})
		} else {
			out = append(out, Assignment{roleReader, "Reader", scope, "read the cluster's load balancer and public IP address (the origin)"})
		}
	}
	return out
}

// roles prints the assignments, as az commands, and makes them with
// AssignRoles (names derived from scope, role and principal, so that a
// second run changes nothing).
func (r *run) roles(ctx context.Context) error {
	principal := r.PrincipalID
	if principal == "" {
		principal = "<object id of fleetnet-gateway's identity>"
	}
	if len(r.MemberResourceGroups) == 0 {
		r.logf("(set E2E_MEMBER_RESOURCE_GROUPS to the member clusters' node resource groups to list their roles too)")
	}
	r.logf("role assignments fleetnet-gateway's identity needs:")
	for _, a := range Assignments(r.Config) {
		fmt.Fprintf(r.Out, "  # %s: %s\n  az role assignment create --assignee-object-id %s --assignee-principal-type ServicePrincipal --role %s --scope %s\n",
			a.RoleName, a.Why, principal, a.Role, a.Scope)
		if !r.AssignRoles {
			continue
		}
		path := a.Scope + "/providers/Microsoft.Authorization/roleAssignments/" + deterministicUUID(a.Scope, a.Role, r.PrincipalID)
		body := map[string]any{"properties": map[string]any{
			"roleDefinitionId": fmt.Sprintf("/subscriptions/%s/providers/Microsoft.Authorization/roleDefinitions/%s", r.SubscriptionID, a.Role),
			"principalId":      r.PrincipalID, "principalType": "ServicePrincipal"}}
		if _, err := r.armDo(ctx, http.MethodPut, path, roleAssignmentsAPI, body, nil, http.StatusOK, http.StatusCreated); err != nil {
			return fmt.Errorf("assigning %s on %s: %w", a.RoleName, a.Scope, err)
		}
		r.logf("assigned %s on %s", a.RoleName, a.Scope)
	}
	return nil
}

// objects are the hub's objects setup applies.
func (r *run) objects() []client.Object {
	ann := map[string]string{keys.AnnotationAzureProbePath: r.ProbePath, keys.AnnotationAzureWAFPolicy: r.wafID()}
	if r.Tier == "Premium" {
		ann[keys.AnnotationAzureConnectivity] = r.Connectivity
	}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: r.Class()}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName,
			Description: ptr.To("Azure Front Door " + r.Tier + " (fleetnet e2e)")}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Gateway, Annotations: ann}, Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(r.Class()), Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}},
		&gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Gateway}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(r.Gateway)}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
				Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: gwv1.ObjectName(r.Service), Port: ptr.To[gwv1.PortNumber](80),
			}}}}}},
		}},
	}
}

// applyObjects creates the objects, or brings existing ones to what
// setup wants (a second setup after an edit).
func (r *run) applyObjects(ctx context.Context) error {
	for _, o := range r.objects() {
		err := r.Kube.Create(ctx, o)
		if _, ns := o.(*corev1.Namespace); ns && apierrors.IsAlreadyExists(err) {
			continue // the namespace's own labels and annotations are left as they are
		}
		if apierrors.IsAlreadyExists(err) {
			cur := o.DeepCopyObject().(client.Object)
			if err := r.Kube.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return fmt.Errorf("reading %T %s: %w", o, o.GetName(), err)
			}
			o.SetResourceVersion(cur.GetResourceVersion())
			err = r.Kube.Update(ctx, o)
		}
		if err != nil {
			return fmt.Errorf("applying %T %s: %w", o, o.GetName(), err)
		}
	}
	r.logf("applied GatewayClass %s, Gateway and HTTPRoute %s/%s (backend ServiceImport %s)", r.Class(), r.Namespace, r.Gateway, r.Service)
	return nil
}
