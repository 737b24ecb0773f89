package kuberuntime

import (
	"context"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/events"
)

// Image volumes (a pod volume with an `image` source): before it starts
// any container, SyncPod pulls each image volume's image with the
// volume's pullPolicy, as a container's image is pulled
// (getImageVolumes). A container that mounts one gets the pulled image in
// its CRI mount (Mount.Image), and the runtime mounts the image's files;
// a container that mounts one whose pull failed is not created, and
// waits with the pull's reason (ErrImagePull, ErrImageNeverPull, …), as
// upstream's kubeGenericRuntimeManager does.

// imageVolumePullResult is one image volume's pull: its image, or why not.
type imageVolumePullResult struct {
	spec *runtimeapi.ImageSpec
	err  error
	msg  string
}

// imageVolumePulls are the pod's image volume pulls, by volume name.
type imageVolumePulls map[string]imageVolumePullResult

// getImageVolumes pulls the pod's image volumes (events on the pod).
func (m *Manager) getImageVolumes(ctx context.Context, pod *v1.Pod, sandboxConfig *runtimeapi.PodSandboxConfig, pullSecrets []v1.Secret) imageVolumePulls {
	res := imageVolumePulls{}
	for _, volume := range pod.Spec.Volumes {
		if volume.Image == nil {
			continue
		}
		ref, msg, err := m.imageManager().EnsureImageExists(ctx, containerRef(pod, nil), pod, volume.Image.Reference,
			pullSecrets, sandboxConfig, volume.Image.PullPolicy)
		if err != nil {
			klog.ErrorS(err, "Failed to ensure image", "pod", klog.KObj(pod), "volume", volume.Name)
			res[volume.Name] = imageVolumePullResult{err: err, msg: msg}
			continue
		}
		res[volume.Name] = imageVolumePullResult{spec: &runtimeapi.ImageSpec{
			Image: ref, UserSpecifiedImage: volume.Image.Reference, Annotations: pod.Annotations}}
	}
	return res
}

// toKubeContainerImageVolumes is the image volumes container mounts, or
// the last failed pull among them (its error and message; a Failed event
// on the container for each).
func (m *Manager) toKubeContainerImageVolumes(pulls imageVolumePulls, container *v1.Container, pod *v1.Pod) (kubecontainer.ImageVolumes, string, error) {
	if len(pulls) == 0 {
		return nil, "", nil
	}
	volumes := kubecontainer.ImageVolumes{}
	var lastErr error
	var lastMsg string
	for _, vm := range container.VolumeMounts {
		res, ok := pulls[vm.Name]
		if !ok {
			continue
		}
		if res.err != nil {
			m.event(containerRef(pod, container), v1.EventTypeWarning, events.FailedToCreateContainer, "Error: "+errMessage(res.err))
			lastErr, lastMsg = res.err, res.msg
			continue
		}
		volumes[vm.Name] = res.spec
	}
	if lastErr != nil {
		return nil, lastMsg, lastErr
	}
	return volumes, "", nil
}
