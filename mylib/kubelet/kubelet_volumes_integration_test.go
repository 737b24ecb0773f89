package kubelet

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/volume"
	"mykubelet/mylib/volumemanager"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// TestPVCVolumeIsReadWithNodeCredentialsThenFails proves, against a real
// API server with the Node authorizer, that the volume manager reads a
// pod's PersistentVolumeClaim and its PersistentVolume with the node's own
// credentials (the authorizer allows it: the pod is bound to the node),
// then fails for want of a plugin with upstream's words; another node's
// pod's claim is refused.
func TestPVCVolumeIsReadWithNodeCredentialsThenFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	n1 := kubernetes.NewForConfigOrDie(chaptertest.RegisterNode(t, c, "n1"))

	_, err := admin.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"},
		Spec: v1.PersistentVolumeSpec{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	claim, err := admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-data", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	claim.Status.Phase = v1.ClaimBound // no controller manager here: bind it by hand
	_, err = admin.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The API server's own writers (the PV's status, its protection
	// finalizer) may update it between our read and write: retry.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pv, err := admin.CoreV1().PersistentVolumes().Get(ctx, "pv-data", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "data", UID: claim.UID}
		_, err = admin.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)

	podWith := func(name, node, claimName string) *v1.Pod {
		p, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: node,
			Volumes:    []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}},
			Containers: []v1.Container{{Name: "c", Image: "busybox:1.37", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/d"}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return p
	}
	mine := podWith("mine", "n1", "data")
	theirs := podWith("theirs", "n2", "other")

	pm := &volume.VolumePluginMgr{}
	require.NoError(t, pm.InitPlugins(nil, nil))
	pods := kubepod.NewBasicPodManager()
	pods.AddPod(mine)
	pods.AddPod(theirs) // as if it were ours: the authorizer still says no
	states := &terminations{done: map[types.UID]bool{}}
	vm, err := volumemanager.NewVolumeManager(volumemanager.Config{KubeClient: n1, PodManager: pods,
		PodStateProvider: volumePodStates{states, states, nil}, PluginMgr: pm})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); vm.Run(runCtx, nil) }()
	defer func() { cancel(); <-done }()

	// The ServiceAccount admission plugin added the kube-api-access-*
	// projected volume; with no plugins at all here, it fails too.
	err = vm.WaitForAttachAndMount(ctx, mine)
	require.Error(t, err)
	assert.Regexp(t, `^unmounted volumes=\[data kube-api-access-\w+\], unattached volumes=\[\], failed to process volumes=\[data kube-api-access-\w+\]: `, err.Error())
	assert.Contains(t, err.Error(), `failed to get Plugin from volumeSpec for volume "pv-data" err=no volume plugin matched: persistent volume "pv-data" is of a kind this node cannot mount (hostPath)`)
	err = vm.WaitForAttachAndMount(ctx, theirs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `error processing PVC default/other: failed to fetch PVC from API server: persistentvolumeclaims "other" is forbidden: User "system:node:n1" cannot get resource "persistentvolumeclaims"`)
}
