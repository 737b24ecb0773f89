package pod

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CheckNodeRegistered fails clearly when the Node does not exist: a mirror
// pod is owned by its Node, so chapters 06 and later need chapter 04 first.
func CheckNodeRegistered(ctx context.Context, client kubernetes.Interface, node string) error {
	_, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %q is not registered; mirror pods need their Node: run chapter 04 first (go run ./chapters/04-register-node --node-name %s)", node, node)
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", node, err)
	}
	return nil
}
