package kubelet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/fakeruntime"
	voltesting "mykubelet/mylib/volume/testing"
	"mykubelet/scripts/testkit/testcluster"
)

// TestVolumesOnARealControlPlane runs one kubelet on the mock, with the
// node's credentials, against one control plane for the volume kinds
// whose files a container reads (one control plane: each costs seconds).
func TestVolumesOnARealControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	const node = "volumes-node"
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	rt := runKubeletOnMockWith(t, c, node, true)
	t.Run("secret defaultMode 0400", func(t *testing.T) { testSecretDefaultMode0400(t, admin, rt, node) })
	t.Run("clusterTrustBundle", func(t *testing.T) { testClusterTrustBundleVolume(t, c, admin, rt, node) })
}

// testSecretDefaultMode0400: the documentation's Secret
// volume with defaultMode 0400 ("Distribute Credentials Securely Using
// Secrets"): the kubelet writes the files root's, readable by their owner
// alone, and the container, root in its image, reads them, as on a real
// node (on the mock, its sandbox process keeps root's reading of any file
// of its pod); ls -l shows the mode the pod asked for.
func testSecretDefaultMode0400(t *testing.T, admin kubernetes.Interface, rt *fakeruntime.Runtime, node string) {
	ctx := context.Background()
	_, err := admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "test-secret"},
		StringData: map[string]string{"username": "my-app", "password": "39528$vdg7Jb"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "secret-test-pod"},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1), AutomountServiceAccountToken: ptr.To(false),
			Containers: []v1.Container{{Name: "test-container", Image: "busybox:1.37", Command: []string{"sleep", "3600"},
				VolumeMounts: []v1.VolumeMount{{Name: "secret-volume", MountPath: "/etc/secret-volume", ReadOnly: true}}}},
			Volumes: []v1.Volume{{Name: "secret-volume", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
				SecretName: "test-secret", DefaultMode: ptr.To[int32](0o400)}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	id := runningContainerID(t, admin, "default", "secret-test-pod", "test-container")

	sh := func(script string) (string, string, int32) {
		resp, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", script}, Timeout: 10})
		require.NoError(t, err)
		return string(resp.Stdout), string(resp.Stderr), resp.ExitCode
	}
	out, errOut, code := sh("cat /etc/secret-volume/password; echo; cat /etc/secret-volume/username")
	assert.Zero(t, code, errOut)
	assert.Equal(t, "39528$vdg7Jb\nmy-app", out, "root in the container reads the 0400 files")
	out, errOut, code = sh("ls -l /etc/secret-volume/..data/") // the files behind the atomic writer's links
	assert.Zero(t, code, errOut)
	assert.Regexp(t, `(?m)^-r-------- +12 .* password$`, out, "the mode the pod asked for")
	_, errOut, code = sh("echo x > /etc/secret-volume/password")
	assert.NotZero(t, code)
	assert.Contains(t, errOut, "read-only file system")
}

// testClusterTrustBundleVolume: the node's own credentials
// (system:node:<name>, group system:nodes) may get, list and watch
// ClusterTrustBundles; the kubelet projects one by name, and a signer's
// by label selector, into a pod's volume, each certificate once; an
// optional bundle that is missing is an empty file; a bundle's change
// reaches the file at the pod's next sync (the test annotates the pod for
// one, rather than wait out the minute of the periodic resync); a pod
// whose required bundle is missing stays ContainerCreating, with a
// FailedMount event.
func testClusterTrustBundleVolume(t *testing.T, c *testcluster.Cluster, admin kubernetes.Interface, rt *fakeruntime.Runtime, node string) {
	ctx := context.Background()
	var roots [][]byte
	for i := range 6 {
		roots = append(roots, voltesting.NewRootCA(t, fmt.Sprintf("root-%d", i)))
	}
	ctbs := admin.CertificatesV1().ClusterTrustBundles()
	bundle := func(name, signer string, labels map[string]string, ders ...[]byte) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: voltesting.PEMCerts(ders...)}}
	}
	prod := map[string]string{"env": "prod"}
	for _, b := range []*certificatesv1.ClusterTrustBundle{
		bundle("ctb-by-name", "", nil, roots[0]),
		bundle("example.com:roots:one", "example.com/roots", prod, roots[1], roots[2]),
		bundle("example.com:roots:two", "example.com/roots", prod, roots[2], roots[3]),
		bundle("example.com:roots:three", "example.com/roots", map[string]string{"env": "test"}, roots[4]),
	} {
		_, err := ctbs.Create(ctx, b, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	nodeCTBs := kubernetes.NewForConfigOrDie(c.UserConfig(t, "system:node:"+node, "system:nodes")).CertificatesV1().ClusterTrustBundles()
	list, err := nodeCTBs.List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the node lists ClusterTrustBundles")
	var names []string
	for _, b := range list.Items {
		names = append(names, b.Name)
	}
	// and the controller manager's own, kubernetes.io:kube-apiserver-serving:…
	assert.Subset(t, names, []string{"ctb-by-name", "example.com:roots:one", "example.com:roots:two", "example.com:roots:three"})
	_, err = nodeCTBs.Get(ctx, "ctb-by-name", metav1.GetOptions{})
	require.NoError(t, err, "the node gets a ClusterTrustBundle")
	w, err := nodeCTBs.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err, "the node watches ClusterTrustBundles")
	w.Stop()

	podWith := func(name string, sources ...v1.VolumeProjection) {
		_, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1), AutomountServiceAccountToken: ptr.To(false),
				Containers: []v1.Container{{Name: "c", Image: "busybox:1.37", Command: []string{"sleep", "3600"},
					VolumeMounts: []v1.VolumeMount{{Name: "trust", MountPath: "/etc/trust", ReadOnly: true}}}},
				Volumes: []v1.Volume{{Name: "trust", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: sources}}}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
	}
	podWith("ctb-pod",
		v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("ctb-by-name"), Path: "by-name.pem"}},
		v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/roots"),
			LabelSelector: &metav1.LabelSelector{MatchLabels: prod}, Path: "prod.pem"}},
		v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("absent"), Optional: ptr.To(true), Path: "absent.pem"}})
	podWith("ctb-missing",
		v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("absent"), Path: "absent.pem"}})

	id := runningContainerID(t, admin, "default", "ctb-pod", "c")
	cat := func(f string) string {
		resp, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"cat", "/etc/trust/" + f}, Timeout: 10})
		require.NoError(t, err)
		require.Zero(t, resp.ExitCode, string(resp.Stderr))
		return string(resp.Stdout)
	}
	assert.Equal(t, voltesting.PEMCerts(roots[0]), cat("by-name.pem"))
	assert.Equal(t, voltesting.SortedPEMCerts(roots[1], roots[2], roots[3]), cat("prod.pem"), "the prod bundles' certificates, each once, in DER order")
	assert.Empty(t, cat("absent.pem"), "optional and missing: an empty file")

	cur, err := ctbs.Get(ctx, "ctb-by-name", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Spec.TrustBundle = voltesting.PEMCerts(roots[0], roots[5])
	_, err = ctbs.Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	want, i := voltesting.SortedPEMCerts(roots[0], roots[5]), 0
	require.Eventually(t, func() bool {
		i++
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"resync":"%d"}}}`, i)
		_, err := admin.CoreV1().Pods("default").Patch(ctx, "ctb-pod", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		return cat("by-name.pem") == want
	}, 30*time.Second, time.Second, "the changed bundle reaches the file")

	require.Eventually(t, func() bool {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=ctb-missing,reason=FailedMount"})
		require.NoError(t, err)
		for _, e := range evs.Items {
			if strings.Contains(e.Message, `clustertrustbundle.certificates.k8s.io "absent" not found`) {
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "a FailedMount event for the missing bundle")
	p, err := admin.CoreV1().Pods("default").Get(ctx, "ctb-missing", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, p.Status.ContainerStatuses, 1)
	require.NotNil(t, p.Status.ContainerStatuses[0].State.Waiting, "%+v", p.Status.ContainerStatuses[0].State)
	assert.Equal(t, "ContainerCreating", p.Status.ContainerStatuses[0].State.Waiting.Reason)
}
