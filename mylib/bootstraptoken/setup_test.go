package bootstraptoken

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeCluster answers SubjectAccessReviews for nodeclient like an RBAC
// setup where only groupWithNodeclient is bound to the nodeclient ClusterRole.
func fakeCluster(groupWithNodeclient string) *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		for _, g := range sar.Spec.Groups {
			if g == groupWithNodeclient && sar.Spec.ResourceAttributes.Subresource == "nodeclient" {
				sar.Status.Allowed = true
			}
		}
		return true, sar, nil
	})
	return cs
}

var admin = &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}

func TestSetupGeneratesThenReusesTheToken(t *testing.T) {
	ctx := context.Background()
	cs := fakeCluster(NodeBootstrapTokenAuthGroup)
	clock := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	o := SetupOptions{AutoApprove: true, Kubeconfig: filepath.Join(t.TempDir(), "bootstrap.kubeconfig"), Clock: clock, Out: &out}

	first, err := Setup(ctx, cs, admin, o)
	require.NoError(t, err)
	assert.Equal(t, "generated", first.Source)
	assert.Equal(t, NodeBootstrapTokenAuthGroup, first.Group)
	assert.Equal(t, time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC), first.Expiration, "default TTL is 24h")
	assert.Contains(t, out.String(), "rbac: created clusterrolebinding kubeadm:node-autoapprove-bootstrap")
	assert.Contains(t, out.String(), "approved automatically: yes")
	assert.NotContains(t, out.String(), first.Token.Secret, "the secret part is never printed")

	clock.SetTime(clock.Now().Add(time.Hour))
	out.Reset()
	second, err := Setup(ctx, cs, admin, o)
	require.NoError(t, err)
	assert.Equal(t, "reused", second.Source)
	assert.Equal(t, first.Token, second.Token)
	assert.Contains(t, out.String(), "secret: updated kube-system/bootstrap-token-"+first.Token.ID)
	assert.Contains(t, out.String(), "expires 2030-01-02T01:00:00Z")
	assert.Contains(t, out.String(), "rbac: unchanged clusterrolebinding kubeadm:kubelet-bootstrap")
}

func TestSetupDoesNotReviveAnExpiredToken(t *testing.T) {
	ctx := context.Background()
	cs := fakeCluster(NodeBootstrapTokenAuthGroup)
	clock := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	o := SetupOptions{AutoApprove: true, TTL: time.Minute, Kubeconfig: filepath.Join(t.TempDir(), "k"), Clock: clock, Out: &out}
	first, err := Setup(ctx, cs, admin, o)
	require.NoError(t, err)

	clock.SetTime(clock.Now().Add(2 * time.Minute))
	out.Reset()
	second, err := Setup(ctx, cs, admin, o)
	require.NoError(t, err)
	assert.Equal(t, "generated", second.Source)
	assert.NotEqual(t, first.Token, second.Token)
	assert.Contains(t, out.String(), "not reusing the token in")
	assert.Contains(t, out.String(), "it expired at 2030-01-01T00:01:00Z")

	// A deleted Secret (the tokencleaner's doing) is not brought back either.
	require.NoError(t, cs.CoreV1().Secrets("kube-system").Delete(ctx, second.Token.SecretName(), metav1.DeleteOptions{}))
	out.Reset()
	third, err := Setup(ctx, cs, admin, o)
	require.NoError(t, err)
	assert.Equal(t, "generated", third.Source)
	assert.Contains(t, out.String(), "no longer exists")
}

func TestSetupUsesAGivenTokenAndRefusesAMalformedOne(t *testing.T) {
	ctx := context.Background()
	cs := fakeCluster(NodeBootstrapTokenAuthGroup)
	o := SetupOptions{AutoApprove: true, Token: "abcdef.0123456789abcdef", Kubeconfig: filepath.Join(t.TempDir(), "k")}
	res, err := Setup(ctx, cs, admin, o)
	require.NoError(t, err)
	assert.Equal(t, "given", res.Source)
	assert.Equal(t, testToken, res.Token)
	got, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-abcdef", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "0123456789abcdef", string(got.Data[KeyTokenSecret]))

	o.Token = "abcdef-0123456789abcdef"
	_, err = Setup(ctx, cs, admin, o)
	assert.ErrorContains(t, err, "malformed bootstrap token")
}

func TestSetupForManualApprovalChecksNobodyAutoApproves(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	o := SetupOptions{AutoApprove: false, Kubeconfig: filepath.Join(t.TempDir(), "k"), Out: &out}
	res, err := Setup(ctx, fakeCluster(NodeBootstrapTokenAuthGroup), admin, o)
	require.NoError(t, err)
	assert.Equal(t, ManualApprovalGroup, res.Group)
	assert.Contains(t, out.String(), "approved automatically: no")

	// Someone bound our manual group to nodeclient: manual approval would be a lie.
	_, err = Setup(ctx, fakeCluster(ManualApprovalGroup), admin, o)
	assert.ErrorContains(t, err, "would be approved automatically, not by hand")
}
