package bootstraptoken

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Names and keys of a bootstrap token Secret (k8s.io/cluster-bootstrap/token/api).
const (
	// SecretNamePrefix starts the name of every bootstrap token Secret.
	SecretNamePrefix = "bootstrap-token-"
	// BootstrapUserPrefix starts the user name of a bootstrap token.
	BootstrapUserPrefix = "system:bootstrap:"
	// BootstrappersGroup is the group every bootstrap token is in.
	BootstrappersGroup = "system:bootstrappers"

	KeyTokenID         = "token-id"
	KeyTokenSecret     = "token-secret"
	KeyExpiration      = "expiration"
	KeyDescription     = "description"
	KeyExtraGroups     = "auth-extra-groups"
	KeyUsageAuth       = "usage-bootstrap-authentication"
	KeyUsageSigning    = "usage-bootstrap-signing"
	DefaultTTL         = 24 * time.Hour // kubeadm token create's default --ttl
	defaultDescription = "mykubelet bootstrap token"
)

// NewSecret returns the Secret kube-system/bootstrap-token-<id> for tok.
//
//   - usage-bootstrap-authentication: "true" lets the token authenticate
//     (as system:bootstrap:<id>) — what TLS bootstrapping needs;
//   - usage-bootstrap-signing: "true" lets the bootstrapsigner controller sign
//     the cluster-info ConfigMap with it, which `kubeadm join` uses to trust
//     the API server before it has credentials; we set it like kubeadm does;
//   - expiration: RFC 3339; after it the authenticator refuses the token and
//     the tokencleaner controller deletes the Secret;
//   - auth-extra-groups: groups added to system:bootstrappers; each must start
//     with "system:bootstrappers:".
func NewSecret(tok Token, groups []string, expiration time.Time) *corev1.Secret {
	data := map[string][]byte{
		KeyTokenID:      []byte(tok.ID),
		KeyTokenSecret:  []byte(tok.Secret),
		KeyExpiration:   []byte(expiration.UTC().Format(time.RFC3339)),
		KeyDescription:  []byte(defaultDescription),
		KeyUsageAuth:    []byte("true"),
		KeyUsageSigning: []byte("true"),
	}
	if len(groups) > 0 {
		data[KeyExtraGroups] = []byte(strings.Join(groups, ","))
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tok.SecretName(), Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		Data:       data,
	}
}

// Action says what an Apply or Ensure call did.
type Action string

const (
	Created   Action = "created"
	Updated   Action = "updated"
	Unchanged Action = "unchanged"
)

// ApplySecret creates the Secret, or replaces the data of the one already
// there (same name = same token id), so running twice is safe: a second run
// with the same token moves the expiration forward and changes nothing else.
func ApplySecret(ctx context.Context, cs kubernetes.Interface, s *corev1.Secret) (Action, error) {
	key := s.Namespace + "/" + s.Name
	secrets := cs.CoreV1().Secrets(s.Namespace)
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
	if err == nil {
		return Created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create secret %s: %w", key, err)
	}
	cur, err := secrets.Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get secret %s: %w", key, err)
	}
	if cur.Type != s.Type {
		return "", fmt.Errorf("secret %s exists with type %q, not %q: delete it or use another token id", key, cur.Type, s.Type)
	}
	if reflect.DeepEqual(cur.Data, s.Data) {
		return Unchanged, nil
	}
	cur = cur.DeepCopy()
	cur.Data = s.Data
	if _, err := secrets.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("update secret %s: %w", key, err)
	}
	return Updated, nil
}
