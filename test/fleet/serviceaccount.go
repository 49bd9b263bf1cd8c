package fleet

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AsServiceAccount creates the ServiceAccount namespace/name bound to
// nothing but role (a ClusterRole, created too) and returns a config that
// authenticates as it, so a component run with it has exactly the
// permissions its generated role grants.
func (c *Cluster) AsServiceAccount(t testing.TB, namespace, name string, role *rbacv1.ClusterRole) *rest.Config {
	t.Helper()
	cl := c.Client(t)
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		sa, role,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		},
	} {
		if err := cl.Create(ctx, obj); err != nil && !(apierrors.IsAlreadyExists(err) && isNamespace(obj)) {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := cl.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("requesting a token for %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// isNamespace reports whether obj is a Namespace, which a test may have
// created already.
func isNamespace(obj client.Object) bool {
	_, ok := obj.(*corev1.Namespace)
	return ok
}
