package pod

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCheckNodeRegistered(t *testing.T) {
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	require.NoError(t, CheckNodeRegistered(context.Background(), client, "n1"))
	err := CheckNodeRegistered(context.Background(), client, "n2")
	require.ErrorContains(t, err, `node "n2" is not registered`)
	require.ErrorIs(t, err, ErrNodeNotRegistered)
}
