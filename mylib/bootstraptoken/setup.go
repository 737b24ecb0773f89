package bootstraptoken

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// SetupOptions says which token to use and where to write its kubeconfig.
type SetupOptions struct {
	// Token, when not empty, is the token to use ("<id>.<secret>"), e.g. one
	// an instructor hands out. Otherwise the token already in Kubeconfig is
	// reused, and a new one is generated when there is none.
	Token string
	// TTL is how long the token stays valid from now; 0 means DefaultTTL.
	TTL time.Duration
	// AutoApprove puts the token in kubeadm's group, whose node client CSRs
	// the controller manager approves; false puts it in ManualApprovalGroup.
	AutoApprove bool
	// Kubeconfig is the bootstrap kubeconfig to write (mode 0600).
	Kubeconfig string
	// Clock gives "now" for the expiration; nil means the real clock.
	Clock clock.PassiveClock
	// Out receives one line per step; nil discards them.
	Out io.Writer
}

// SetupResult is what Setup did.
type SetupResult struct {
	Token      Token
	Group      string
	Expiration time.Time
	// Source is "generated", "reused" or "given".
	Source string
}

// Setup does on the cluster what kubeadm's bootstrap-token phase does for one
// token: the token Secret, the RBAC for its group, and a bootstrap kubeconfig.
// It is safe to run again: the token in the kubeconfig is kept while the
// cluster still accepts it (so anything already using it keeps working) and
// its expiration moves to now+TTL; an expired or deleted token is replaced by
// a new one; the bindings are created only when missing or wrong.
//
// admin is the admin kubeconfig's config: the bootstrap kubeconfig copies its
// server and CA, never its credentials. cs must be an admin client.
func Setup(ctx context.Context, cs kubernetes.Interface, admin *rest.Config, o SetupOptions) (*SetupResult, error) {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.TTL < 0 {
		return nil, fmt.Errorf("token TTL %s is negative", o.TTL)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}

	res := &SetupResult{Group: GroupFor(o.AutoApprove)}
	var err error
	if res.Token, res.Source, err = chooseToken(ctx, cs, o, out); err != nil {
		return nil, err
	}

	res.Expiration = o.Clock.Now().Add(o.TTL).UTC().Truncate(time.Second)
	secret := NewSecret(res.Token, []string{res.Group}, res.Expiration)
	action, err := ApplySecret(ctx, cs, secret)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "secret: %s %s/%s (type %s, group %s, expires %s)\n", action, secret.Namespace, secret.Name,
		secret.Type, res.Group, res.Expiration.Format(time.RFC3339))

	for _, b := range Bindings(o.AutoApprove) {
		action, err := EnsureClusterRoleBinding(ctx, cs, b)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "rbac: %s clusterrolebinding %s (Group %s -> ClusterRole %s)\n", action, b.Name, b.Subjects[0].Name, b.RoleRef.Name)
	}

	// Ask the question the csrapprover will ask, so that the approval mode
	// we promise is the one the cluster will apply.
	groups := []string{BootstrappersGroup, res.Group, "system:authenticated"}
	auto, err := CanAutoApprove(ctx, cs, res.Token.Username(), groups)
	if err != nil {
		return nil, err
	}
	switch {
	case auto && !o.AutoApprove:
		return nil, fmt.Errorf("group %s may create certificatesigningrequests/nodeclient (some ClusterRoleBinding grants it: see `kubectl get clusterrolebindings -o wide | grep nodeclient`), so its CSRs would be approved automatically, not by hand", res.Group)
	case !auto && o.AutoApprove:
		return nil, fmt.Errorf("group %s may not create certificatesigningrequests/nodeclient although clusterrolebinding %s binds it: is ClusterRole %s missing?", res.Group, NodeAutoApproveBootstrapBinding, NodeClientClusterRole)
	}
	fmt.Fprintf(out, "rbac: node client CSRs of %s are approved automatically: %s\n", res.Token.Username(), yesNo(auto))

	if err := WriteKubeconfig(o.Kubeconfig, admin, res.Token); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "kubeconfig: wrote %s (mode 0600)\n", o.Kubeconfig)
	return res, nil
}

// chooseToken returns the given token, else the one in the kubeconfig while
// the cluster still accepts it, else a new one.
func chooseToken(ctx context.Context, cs kubernetes.Interface, o SetupOptions, out io.Writer) (Token, string, error) {
	if o.Token != "" {
		tok, err := Parse(o.Token)
		if err != nil {
			return Token{}, "", err
		}
		fmt.Fprintf(out, "token: using the given bootstrap token, id %s\n", tok.ID)
		return tok, "given", nil
	}
	tok, err := TokenFromKubeconfig(o.Kubeconfig)
	if err == nil {
		err = stillAccepted(ctx, cs, tok, o.Clock.Now())
		if err == nil {
			fmt.Fprintf(out, "token: reusing the bootstrap token in %s, id %s\n", o.Kubeconfig, tok.ID)
			return tok, "reused", nil
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "token: not reusing the token in %s: %v\n", o.Kubeconfig, err)
	}
	if tok, err = Generate(); err != nil {
		return Token{}, "", err
	}
	fmt.Fprintf(out, "token: generated a new bootstrap token, id %s\n", tok.ID)
	return tok, "generated", nil
}

// stillAccepted says why the API server would no longer accept tok: its
// Secret is gone (the tokencleaner deletes expired ones), holds another
// secret, or has expired. An expired token is not brought back to life.
func stillAccepted(ctx context.Context, cs kubernetes.Interface, tok Token, now time.Time) error {
	s, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, tok.SecretName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("its secret %s/%s no longer exists", metav1.NamespaceSystem, tok.SecretName())
	case err != nil:
		return fmt.Errorf("get secret %s/%s: %w", metav1.NamespaceSystem, tok.SecretName(), err)
	case string(s.Data[KeyTokenSecret]) != tok.Secret:
		return fmt.Errorf("secret %s/%s holds another token", metav1.NamespaceSystem, tok.SecretName())
	}
	if exp, ok := s.Data[KeyExpiration]; ok {
		t, err := time.Parse(time.RFC3339, string(exp))
		if err != nil || !now.Before(t) {
			return fmt.Errorf("it expired at %s", exp)
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
