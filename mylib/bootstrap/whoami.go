package bootstrap

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// WhoAmI asks the API server who cfg authenticates as, with a
// SelfSubjectReview (what `kubectl auth whoami` does). Every authenticated
// user may create one, so it works with a bootstrap token too.
func WhoAmI(ctx context.Context, cfg *rest.Config) (authenticationv1.UserInfo, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("selfsubjectreview at %s: %w", cfg.Host, err)
	}
	return r.Status.UserInfo, nil
}

// PrintWhoAmI asks WhoAmI and prints the answer to w, one line for the
// username and one for the groups.
func PrintWhoAmI(ctx context.Context, w io.Writer, cfg *rest.Config) error {
	who, err := WhoAmI(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "whoami: username %s\n", who.Username)
	fmt.Fprintf(w, "whoami: groups %s\n", strings.Join(who.Groups, " "))
	return nil
}

// WhoAmILine is WhoAmI's answer in one line: "user <name>, groups <a>,<b>",
// the groups sorted.
func WhoAmILine(ctx context.Context, cfg *rest.Config) (string, error) {
	who, err := WhoAmI(ctx, cfg)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("user %s, groups %s", who.Username, strings.Join(slices.Sorted(slices.Values(who.Groups)), ",")), nil
}
