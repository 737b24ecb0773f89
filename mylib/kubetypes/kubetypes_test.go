package kubetypes

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodFullNameRoundTrip(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "static-web-n1", Namespace: "kube-system"}}
	full := GetPodFullName(pod)
	require.Equal(t, "static-web-n1_kube-system", full)
	name, ns, err := ParsePodFullName(full)
	require.NoError(t, err)
	require.Equal(t, "static-web-n1", name)
	require.Equal(t, "kube-system", ns)

	for _, bad := range []string{"", "noseparator", "_ns", "name_"} {
		_, _, err := ParsePodFullName(bad)
		require.Error(t, err, bad)
	}
}

func TestStaticAndMirrorPods(t *testing.T) {
	withAnnotations := func(a map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Annotations: a}}
	}
	static := withAnnotations(map[string]string{ConfigSourceAnnotationKey: FileSource})
	api := withAnnotations(map[string]string{ConfigSourceAnnotationKey: ApiserverSource})
	mirror := withAnnotations(map[string]string{ConfigSourceAnnotationKey: FileSource, ConfigMirrorAnnotationKey: "hash"})
	none := withAnnotations(nil)

	require.True(t, IsStaticPod(static))
	require.False(t, IsStaticPod(api))
	require.False(t, IsStaticPod(none), "a pod without a source annotation is not static")
	require.True(t, IsMirrorPod(mirror))
	require.False(t, IsMirrorPod(static))
	_, err := GetPodSource(none)
	require.ErrorContains(t, err, ConfigSourceAnnotationKey)
}

func TestTimestampHasNineDigits(t *testing.T) {
	ts := time.Date(2026, 11, 21, 6, 0, 0, 1000, time.UTC)
	require.Equal(t, "2026-11-21T06:00:00.000001000Z", Timestamp(ts))
}

func TestOperationAndSyncTypeNames(t *testing.T) {
	require.Equal(t, "kill", SyncPodKill.String())
	require.Equal(t, "create", SyncPodCreate.String())
	require.Equal(t, "unknown", SyncPodType(99).String())
	require.NotEqual(t, ADD.String(), UPDATE.String())
}
