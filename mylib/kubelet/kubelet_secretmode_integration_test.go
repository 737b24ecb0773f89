package kubelet

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/podcertificate"
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
	t.Run("podCertificate", func(t *testing.T) { testPodCertificateVolume(t, c, admin, rt, node) })
	t.Run("image", func(t *testing.T) { testImageVolumeOnTheMock(t, admin, node) })
}

// testImageVolumeOnTheMock: an image volume (the real node's
// yaml/real-node/image-volume.yaml) is pulled, and the mock runtime
// refuses to mount it: the container waits in CreateContainerError, with
// the mock's reason.
func testImageVolumeOnTheMock(t *testing.T, admin kubernetes.Interface, node string) {
	ctx := context.Background()
	const ref = "docker.io/library/busybox:1.35.0"
	_, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "image-volume"},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1), AutomountServiceAccountToken: ptr.To(false),
			Containers: []v1.Container{{Name: "shell", Image: ref, Command: []string{"sleep", "infinity"},
				VolumeMounts: []v1.VolumeMount{{Name: "volume", MountPath: "/volume"}}}},
			Volumes: []v1.Volume{{Name: "volume", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{
				Reference: ref, PullPolicy: v1.PullIfNotPresent}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var waiting *v1.ContainerStateWaiting
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "image-volume", metav1.GetOptions{})
		require.NoError(t, err)
		if cs := p.Status.ContainerStatuses; len(cs) == 1 {
			waiting = cs[0].State.Waiting
		}
		return waiting != nil && waiting.Reason == "CreateContainerError"
	}, time.Minute, 100*time.Millisecond, "waiting: %+v", waiting)
	assert.Equal(t, "CreateContainer shell: mount /volume: image volume "+ref+": this runtime cannot mount an image's files (a real one can: containerd 2.1 or later)", waiting.Message)
	require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, "image-volume", metav1.DeleteOptions{}))
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

// testPodCertificateVolume: the node's credentials may file a
// PodCertificateRequest for a pod bound to the node, and are refused
// one for a pod bound to another node (NodeRestriction); the kubelet
// files one for a pod's podCertificate source, the pod waits
// (FailedMount) until the test, acting as the signer, issues it; then the
// files hold the key and the chain; at beginRefreshAt (seconds later,
// the test's signer says so) the kubelet files a second request with a
// new key, and once it is issued the files change. (The API server wants
// beginRefreshAt 10 minutes after a notBefore within 5 minutes of its
// time: the test moves the manager's clock on, podCertificateClock.)
func testPodCertificateVolume(t *testing.T, c *testcluster.Cluster, admin kubernetes.Interface, rt *fakeruntime.Runtime, node string) {
	ctx := context.Background()
	const signerName = "example.com/pod-certs"
	pcrs := admin.CertificatesV1().PodCertificateRequests("default")
	src := &v1.PodCertificateProjection{SignerName: signerName, KeyType: "ECDSAP256", MaxExpirationSeconds: ptr.To[int32](7200),
		CredentialBundlePath: "bundle.pem", KeyPath: "tls.key", CertificateChainPath: "tls.crt"}

	_, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other-node"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pc-pod"},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1), AutomountServiceAccountToken: ptr.To(false),
			Containers: []v1.Container{{Name: "c", Image: "busybox:1.37", Command: []string{"sleep", "3600"},
				VolumeMounts: []v1.VolumeMount{{Name: "certs", MountPath: "/etc/certs", ReadOnly: true}}}},
			Volumes: []v1.Volume{{Name: "certs", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{PodCertificate: src}}}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Filing a request by hand: the kubelet's node may for a pod of its
	// own (NodeRestriction also wants the pod to mount the signer's
	// source), another node may not for the same pod.
	sa, err := admin.CoreV1().ServiceAccounts("default").Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	require.NoError(t, err)
	fileAs := func(nodeName string) (*certificatesv1.PodCertificateRequest, error) {
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		require.NoError(t, err)
		_, pcr, err := podcertificate.NewPodCertificateRequest(pod, sa.UID, types.NodeName(nodeName), n.UID, src)
		require.NoError(t, err)
		return kubernetes.NewForConfigOrDie(c.UserConfig(t, "system:node:"+nodeName, "system:nodes")).
			CertificatesV1().PodCertificateRequests("default").Create(ctx, pcr, metav1.CreateOptions{})
	}
	byHand, err := fileAs(node)
	require.NoError(t, err, "the node files a request for its own pod")
	require.NoError(t, pcrs.Delete(ctx, byHand.Name, metav1.DeleteOptions{}))
	_, err = fileAs("other-node")
	require.Error(t, err, "another node files no request for the pod")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	t.Logf("another node's request: %v", err)

	// requests waits for the kubelet's n-th request and returns them all.
	requests := func(n int) []certificatesv1.PodCertificateRequest {
		var items []certificatesv1.PodCertificateRequest
		require.Eventually(t, func() bool {
			l, err := pcrs.List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			items = l.Items
			return len(items) >= n
		}, 30*time.Second, 100*time.Millisecond, "the kubelet's request %d", n)
		return items
	}
	first := requests(1)[0]
	assert.Equal(t, "pc-pod", first.Spec.PodName)
	assert.Equal(t, types.NodeName(node), first.Spec.NodeName)
	assert.Equal(t, signerName, first.Spec.SignerName)
	require.Eventually(t, func() bool {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pc-pod,reason=FailedMount"})
		require.NoError(t, err)
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "credential bundle is not issued yet") {
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "a FailedMount event while the request waits")

	signer := voltesting.NewPodCertificateSigner(t)
	issue := func(pcr certificatesv1.PodCertificateRequest, refreshIn time.Duration) string {
		now := time.Now()
		notBefore := now.Add(-4 * time.Minute)
		signer.Issue(t, &pcr, notBefore, notBefore.Add(refreshIn), notBefore.Add(2*time.Hour))
		_, err := pcrs.UpdateStatus(ctx, &pcr, metav1.UpdateOptions{})
		require.NoError(t, err)
		return pcr.Status.CertificateChain
	}
	chain1 := issue(first, 10*time.Minute) // the soonest the API server allows: 6 minutes from now
	id := runningContainerID(t, admin, "default", "pc-pod", "c")
	cat := func(f string) string {
		resp, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"cat", "/etc/certs/" + f}, Timeout: 10})
		require.NoError(t, err)
		require.Zero(t, resp.ExitCode, string(resp.Stderr))
		return string(resp.Stdout)
	}
	key1 := cat("tls.key")
	assert.Equal(t, chain1, cat("tls.crt"))
	assert.Equal(t, key1+chain1, cat("bundle.pem"), "the key, then the chain")
	block, _ := pem.Decode([]byte(key1))
	require.NotNil(t, block)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	csr, err := x509.ParseCertificateRequest(first.Spec.StubPKCS10Request)
	require.NoError(t, err)
	assert.True(t, key.(*ecdsa.PrivateKey).PublicKey.Equal(csr.PublicKey), "the key the request was for")

	// beginRefreshAt passes (the manager's clock moves on 6 minutes); a
	// pod sync sets the volume up again.
	podCertificateClock.ahead.Store(int64(6*time.Minute + 5*time.Second))
	t.Cleanup(func() { podCertificateClock.ahead.Store(0) })
	i := 0
	require.Eventually(t, func() bool {
		i++
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"resync":"%d"}}}`, i)
		_, err := admin.CoreV1().Pods("default").Patch(ctx, "pc-pod", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		l, err := pcrs.List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(l.Items) == 2
	}, 30*time.Second, 500*time.Millisecond, "a second request from beginRefreshAt")
	var second certificatesv1.PodCertificateRequest
	for _, p := range requests(2) {
		if p.Name != first.Name {
			second = p
		}
	}
	assert.NotEqual(t, first.Spec.StubPKCS10Request, second.Spec.StubPKCS10Request, "a new key")
	assert.Equal(t, chain1, cat("tls.crt"), "the old chain until the new one is issued")
	chain2 := issue(second, time.Hour)
	require.Eventually(t, func() bool {
		i++
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"resync":"%d"}}}`, i)
		_, err := admin.CoreV1().Pods("default").Patch(ctx, "pc-pod", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		return cat("tls.crt") == chain2
	}, 30*time.Second, 500*time.Millisecond, "the refreshed chain reaches the file")
	assert.NotEqual(t, key1, cat("tls.key"))
	assert.Equal(t, cat("tls.key")+chain2, cat("bundle.pem"))
}
