package localcluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The cluster's second start replaces the APIService of the first (its port
// changed), while the aggregator may be writing that APIService's status:
// a conflict is read again and retried, not an error that stops the start.
func TestApplyMetricsServerObjectsRetriesAConflict(t *testing.T) {
	ca, err := NewCA("test-ca")
	require.NoError(t, err)
	c := &Cluster{ca: ca, Ports: Ports{MetricsServer: 4443}}

	old := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": MetricsAPIService, "resourceVersion": "1"},
		"spec":       map[string]any{"service": map[string]any{"port": int64(1)}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{apiServiceGVR: "APIServiceList"}, old)
	updates := 0
	dyn.PrependReactor("update", "apiservices", func(k8stesting.Action) (bool, runtime.Object, error) {
		updates++
		if updates == 1 {
			return true, nil, apierrors.NewConflict(apiServiceGVR.GroupResource(), MetricsAPIService,
				errString("the object has been modified"))
		}
		return false, nil, nil
	})

	require.NoError(t, c.applyMetricsServerObjects(context.Background(), fake.NewClientset(), dyn))
	require.Equal(t, 2, updates, "one conflict, then one update that went through")
	got, err := dyn.Resource(apiServiceGVR).Get(context.Background(), MetricsAPIService, metav1.GetOptions{})
	require.NoError(t, err)
	port, _, _ := unstructured.NestedInt64(got.Object, "spec", "service", "port")
	require.Equal(t, int64(4443), port, "the new port is written")
}

type errString string

func (e errString) Error() string { return string(e) }
