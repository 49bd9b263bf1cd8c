package crossregion

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// Credential kinds NewCredential accepts (for a --azure-credential flag).
const (
	// CredentialDefault is azidentity's DefaultAzureCredential: the
	// AZURE_* environment (service principal), workload identity, managed
	// identity, then the Azure CLI's login.
	CredentialDefault = "default"
	// CredentialWorkloadIdentity is AKS workload identity (the federated
	// token file and AZURE_CLIENT_ID/AZURE_TENANT_ID the webhook injects).
	CredentialWorkloadIdentity = "workload-identity"
	// CredentialManagedIdentity is the node's or pod's managed identity;
	// clientID selects a user-assigned one.
	CredentialManagedIdentity = "managed-identity"
	// CredentialAzureCLI is `az login`'s, for running outside Azure.
	CredentialAzureCLI = "azure-cli"
)

// CredentialKinds are the kinds NewCredential accepts.
var CredentialKinds = []string{CredentialDefault, CredentialWorkloadIdentity, CredentialManagedIdentity, CredentialAzureCLI}

// NewCredential is the azidentity credential of kind; clientID (optional)
// selects the identity for workload-identity and managed-identity.
func NewCredential(kind, clientID string) (azcore.TokenCredential, error) {
	switch kind {
	case CredentialDefault, "":
		return azidentity.NewDefaultAzureCredential(nil)
	case CredentialWorkloadIdentity:
		return azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{ClientID: clientID})
	case CredentialManagedIdentity:
		opts := &azidentity.ManagedIdentityCredentialOptions{}
		if clientID != "" {
			opts.ID = azidentity.ClientID(clientID)
		}
		return azidentity.NewManagedIdentityCredential(opts)
	case CredentialAzureCLI:
		return azidentity.NewAzureCLICredential(nil)
	}
	return nil, fmt.Errorf("azure credential %q: want one of %v", kind, CredentialKinds)
}
