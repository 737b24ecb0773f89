package options

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNodeAnnotationsNameTheProgram(t *testing.T) {
	assert.Equal(t, map[string]string{"mykubelet.dev/chapter": "06-static-pods"}, New("06-static-pods").NodeAnnotations())
}

// TestAnnotateNodeReplacesAnEarlierProgramsMark: a later program acting as
// the same node overwrites the annotation and leaves the others.
func TestAnnotateNodeReplacesAnEarlierProgramsMark(t *testing.T) {
	cs := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		ChapterAnnotation: "04-register-node", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}}})
	o := New("07-pod-config")
	require.NoError(t, o.Parse([]string{"--node-name", "n1"}))
	require.NoError(t, o.AnnotateNode(context.Background(), cs))
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "07-pod-config", n.Annotations[ChapterAnnotation])
	assert.Equal(t, "true", n.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"])

	o = New("08-pod-workers")
	require.NoError(t, o.Parse([]string{"--node-name", "gone"}))
	assert.ErrorContains(t, o.AnnotateNode(context.Background(), cs), `annotate node gone: nodes "gone" not found`)
}
