package bootstraptoken

import (
	"context"
	"fmt"
	"reflect"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Groups a bootstrap token can be put in (its auth-extra-groups).
const (
	// NodeBootstrapTokenAuthGroup is kubeadm's group for node bootstrap
	// tokens: `kubeadm join` tokens are in it, and kubeadm binds it to the
	// two ClusterRoles below. Using the same name means a learner who later
	// reads a kubeadm cluster finds the same bindings.
	NodeBootstrapTokenAuthGroup = "system:bootstrappers:kubeadm:default-node-token"
	// ManualApprovalGroup is mykubelet's own group for tokens whose node
	// CSRs a person approves (kubectl certificate approve): it may create
	// CSRs, but it is not bound to the nodeclient ClusterRole, so the
	// controller manager leaves its CSRs pending.
	ManualApprovalGroup = "system:bootstrappers:mykubelet:manual-approval"
	// NodesGroup is the group of every node's client certificate (O=system:nodes).
	NodesGroup = "system:nodes"
)

// ClusterRoles the API server creates at start-up (its RBAC bootstrap policy).
const (
	// NodeBootstrapperClusterRole may create, get, list and watch CSRs.
	NodeBootstrapperClusterRole = "system:node-bootstrapper"
	// NodeClientClusterRole grants create on certificatesigningrequests/nodeclient:
	// the csrapprover controller approves a new node client CSR when its
	// requester holds it.
	NodeClientClusterRole = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	// SelfNodeClientClusterRole grants create on
	// certificatesigningrequests/selfnodeclient: the approver approves a
	// node's CSR to renew its own certificate when the node holds it.
	SelfNodeClientClusterRole = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
)

// ClusterRoleBindings kubeadm creates (cmd/kubeadm/app/constants).
const (
	KubeletBootstrapBinding         = "kubeadm:kubelet-bootstrap"
	NodeAutoApproveBootstrapBinding = "kubeadm:node-autoapprove-bootstrap"
	NodeAutoApproveRotationBinding  = "kubeadm:node-autoapprove-certificate-rotation"
	ManualApprovalBootstrapBinding  = "mykubelet:manual-approval-bootstrap"
)

// GroupFor returns the token group for the approval mode: kubeadm's group
// when CSRs should be approved automatically, ManualApprovalGroup otherwise.
func GroupFor(autoApprove bool) string {
	if autoApprove {
		return NodeBootstrapTokenAuthGroup
	}
	return ManualApprovalGroup
}

// Bindings returns the ClusterRoleBindings TLS bootstrapping needs:
//   - with autoApprove, kubeadm's three (AllowBootstrapTokensToPostCSRs,
//     AutoApproveNodeBootstrapTokens, AutoApproveNodeCertificateRotation);
//   - without, only "may create CSRs" for ManualApprovalGroup, plus the
//     renewal binding for system:nodes.
func Bindings(autoApprove bool) []*rbacv1.ClusterRoleBinding {
	renew := clusterRoleBinding(NodeAutoApproveRotationBinding, NodesGroup, SelfNodeClientClusterRole)
	if !autoApprove {
		return []*rbacv1.ClusterRoleBinding{
			clusterRoleBinding(ManualApprovalBootstrapBinding, ManualApprovalGroup, NodeBootstrapperClusterRole),
			renew,
		}
	}
	return []*rbacv1.ClusterRoleBinding{
		clusterRoleBinding(KubeletBootstrapBinding, NodeBootstrapTokenAuthGroup, NodeBootstrapperClusterRole),
		clusterRoleBinding(NodeAutoApproveBootstrapBinding, NodeBootstrapTokenAuthGroup, NodeClientClusterRole),
		renew,
	}
}

func clusterRoleBinding(name, group, clusterRole string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
	}
}

// EnsureClusterRoleBinding makes the binding exist with exactly want's role
// and subjects. It creates it when missing, updates the subjects when they
// differ, and recreates it when the role differs (roleRef cannot be changed
// in place). Running it again changes nothing.
func EnsureClusterRoleBinding(ctx context.Context, cs kubernetes.Interface, want *rbacv1.ClusterRoleBinding) (Action, error) {
	crbs := cs.RbacV1().ClusterRoleBindings()
	cur, err := crbs.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := crbs.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("create clusterrolebinding %s: %w", want.Name, err)
		}
		return Created, nil
	case err != nil:
		return "", fmt.Errorf("get clusterrolebinding %s: %w", want.Name, err)
	case cur.RoleRef != want.RoleRef:
		if err := crbs.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil {
			return "", fmt.Errorf("replace clusterrolebinding %s (role %s, want %s): %w", want.Name, cur.RoleRef.Name, want.RoleRef.Name, err)
		}
		if _, err := crbs.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("create clusterrolebinding %s: %w", want.Name, err)
		}
		return Updated, nil
	case !reflect.DeepEqual(cur.Subjects, want.Subjects):
		cur = cur.DeepCopy()
		cur.Subjects = want.Subjects
		if _, err := crbs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return "", fmt.Errorf("update clusterrolebinding %s: %w", want.Name, err)
		}
		return Updated, nil
	}
	return Unchanged, nil
}

// CanAutoApprove asks the API server (a SubjectAccessReview) the question the
// controller manager's csrapprover asks before approving a new node client
// CSR: may this user, in these groups, create certificatesigningrequests/nodeclient?
func CanAutoApprove(ctx context.Context, cs kubernetes.Interface, user string, groups []string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group:       "certificates.k8s.io",
			Resource:    "certificatesigningrequests",
			Subresource: "nodeclient",
			Verb:        "create",
		},
	}}
	res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subjectaccessreview for %s: %w", user, err)
	}
	return res.Status.Allowed, nil
}
