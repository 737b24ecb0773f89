package bootstraptoken

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// binding is "name: group -> clusterrole", to compare bindings at a glance.
func binding(b *rbacv1.ClusterRoleBinding) string {
	s := b.Name + ":"
	for _, sub := range b.Subjects {
		s += " " + sub.Kind + " " + sub.Name
	}
	return s + " -> " + b.RoleRef.Kind + " " + b.RoleRef.Name
}

func TestBindingsWithAutoApprovalAreKubeadms(t *testing.T) {
	var got []string
	for _, b := range Bindings(true) {
		got = append(got, binding(b))
	}
	assert.Equal(t, []string{
		"kubeadm:kubelet-bootstrap: Group system:bootstrappers:kubeadm:default-node-token -> ClusterRole system:node-bootstrapper",
		"kubeadm:node-autoapprove-bootstrap: Group system:bootstrappers:kubeadm:default-node-token -> ClusterRole system:certificates.k8s.io:certificatesigningrequests:nodeclient",
		"kubeadm:node-autoapprove-certificate-rotation: Group system:nodes -> ClusterRole system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
	}, got)
}

func TestBindingsForManualApprovalLeaveOutNodeclient(t *testing.T) {
	var got []string
	for _, b := range Bindings(false) {
		got = append(got, binding(b))
		assert.NotEqual(t, NodeClientClusterRole, b.RoleRef.Name)
	}
	assert.Equal(t, []string{
		"mykubelet:manual-approval-bootstrap: Group system:bootstrappers:mykubelet:manual-approval -> ClusterRole system:node-bootstrapper",
		"kubeadm:node-autoapprove-certificate-rotation: Group system:nodes -> ClusterRole system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
	}, got)
	assert.Equal(t, ManualApprovalGroup, GroupFor(false))
	assert.Equal(t, NodeBootstrapTokenAuthGroup, GroupFor(true))
}

func TestEnsureClusterRoleBindingIsIdempotent(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	for _, b := range Bindings(true) {
		a, err := EnsureClusterRoleBinding(ctx, cs, b)
		require.NoError(t, err)
		assert.Equal(t, Created, a, b.Name)
	}
	for _, b := range Bindings(true) {
		a, err := EnsureClusterRoleBinding(ctx, cs, b)
		require.NoError(t, err)
		assert.Equal(t, Unchanged, a, b.Name)
	}
	list, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.Items, 3)
}

func TestEnsureClusterRoleBindingRepairsSubjectsAndRole(t *testing.T) {
	ctx := context.Background()
	want := Bindings(true)[1] // group -> nodeclient
	wrongSubjects := want.DeepCopy()
	wrongSubjects.Subjects[0].Name = "system:bootstrappers:someone-else"
	cs := fake.NewClientset(wrongSubjects)

	a, err := EnsureClusterRoleBinding(ctx, cs, want)
	require.NoError(t, err)
	assert.Equal(t, Updated, a)
	got, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, want.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, want.Subjects, got.Subjects)

	wrongRole := want.DeepCopy()
	wrongRole.RoleRef.Name = "view"
	cs = fake.NewClientset(wrongRole)
	a, err = EnsureClusterRoleBinding(ctx, cs, want)
	require.NoError(t, err)
	assert.Equal(t, Updated, a)
	got, err = cs.RbacV1().ClusterRoleBindings().Get(ctx, want.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, want.RoleRef, got.RoleRef)
}
