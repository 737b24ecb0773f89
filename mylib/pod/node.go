package pod

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrNodeNotRegistered is CheckNodeRegistered's error when the Node is missing.
var ErrNodeNotRegistered = errors.New("is not registered")

// CheckNodeRegistered fails clearly when the Node does not exist: a mirror
// pod is owned by its Node, so the Node must be registered first.
func CheckNodeRegistered(ctx context.Context, client kubernetes.Interface, node string) error {
	_, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %q %w; mirror pods need their Node", node, ErrNodeNotRegistered)
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", node, err)
	}
	return nil
}
