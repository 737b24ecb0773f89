package bootstraptoken

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var testToken = Token{ID: "abcdef", Secret: "0123456789abcdef"}

func TestNewSecretHasWhatTheAuthenticatorReads(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	s := NewSecret(testToken, []string{NodeBootstrapTokenAuthGroup}, exp)

	assert.Equal(t, "bootstrap-token-abcdef", s.Name)
	assert.Equal(t, "kube-system", s.Namespace)
	assert.Equal(t, corev1.SecretTypeBootstrapToken, s.Type)
	assert.Equal(t, corev1.SecretType("bootstrap.kubernetes.io/token"), s.Type)
	want := map[string]string{
		"token-id":                       "abcdef",
		"token-secret":                   "0123456789abcdef",
		"expiration":                     "2030-01-02T02:04:05Z",
		"usage-bootstrap-authentication": "true",
		"usage-bootstrap-signing":        "true",
		"auth-extra-groups":              "system:bootstrappers:kubeadm:default-node-token",
		"description":                    defaultDescription,
	}
	got := map[string]string{}
	for k, v := range s.Data {
		got[k] = string(v)
	}
	assert.Equal(t, want, got)
}

func TestNewSecretWithoutExtraGroupsLeavesTheKeyOut(t *testing.T) {
	s := NewSecret(testToken, nil, time.Now())
	assert.NotContains(t, s.Data, KeyExtraGroups)
}

func TestApplySecretCreatesThenUpdatesThenLeavesAlone(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	a, err := ApplySecret(ctx, cs, NewSecret(testToken, []string{ManualApprovalGroup}, exp))
	require.NoError(t, err)
	assert.Equal(t, Created, a)

	a, err = ApplySecret(ctx, cs, NewSecret(testToken, []string{NodeBootstrapTokenAuthGroup}, exp.Add(time.Hour)))
	require.NoError(t, err)
	assert.Equal(t, Updated, a)
	got, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-abcdef", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "2030-01-01T01:00:00Z", string(got.Data[KeyExpiration]))
	assert.Equal(t, NodeBootstrapTokenAuthGroup, string(got.Data[KeyExtraGroups]))

	a, err = ApplySecret(ctx, cs, NewSecret(testToken, []string{NodeBootstrapTokenAuthGroup}, exp.Add(time.Hour)))
	require.NoError(t, err)
	assert.Equal(t, Unchanged, a)
}

func TestApplySecretRefusesASecretOfAnotherType(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"},
		Type:       corev1.SecretTypeOpaque,
	})
	_, err := ApplySecret(ctx, cs, NewSecret(testToken, nil, time.Now()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kube-system/bootstrap-token-abcdef")
	assert.Contains(t, err.Error(), `type "Opaque"`)
}
