package images

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/events"
)

// imageManager pulls images by pull policy, one pod's failed image after
// a back-off, through a serial or parallel puller and the registry rate.
type imageManager struct {
	recorder     record.EventRecorder // nil: events are logged instead
	imageService ImageService
	backOff      *flowcontrol.Backoff
	// prevPullErrMsg is the last failed pull's reason and message, by
	// back-off key: while backing off, the container's waiting message
	// says it (upstream's prevPullErrMsg).
	prevPullErrMsg sync.Map
	puller         imagePuller
}

var _ ImageManager = &imageManager{}

// NewImageBackOff is the image pull back-off on clk: 10 s after a failed
// pull, doubling to 300 s (upstream NewMainKubelet's imageBackOff).
func NewImageBackOff(clk clock.Clock) *flowcontrol.Backoff {
	return flowcontrol.NewFakeBackOff(InitialImagePullBackOff, MaxImagePullBackOff, clk)
}

// NewImageManager returns the image manager (upstream's NewImageManager):
// pulls go through the registry rate limit of pull (registryPullQPS,
// registryBurst; QPS 0: none) and then the serial puller or, with
// SerializeImagePulls false, the parallel one (MaxParallelImagePulls at
// once, nil: no limit). imageBackOff (NewImageBackOff) keeps the failed
// pulls; its Clock is the manager's.
func NewImageManager(recorder record.EventRecorder, imageService ImageService, imageBackOff *flowcontrol.Backoff, pull PullConfig) ImageManager {
	clk := imageBackOff.Clock
	imageService = throttleImagePulling(imageService, pull.RegistryPullQPS, pull.RegistryBurst, clk)
	var puller imagePuller
	if pull.SerializeImagePulls {
		puller = newSerialImagePuller(imageService, clk)
	} else {
		puller = newParallelImagePuller(imageService, pull.MaxParallelImagePulls, clk)
	}
	return &imageManager{recorder: recorder, imageService: imageService, backOff: imageBackOff, puller: puller}
}

// logIt records an event on objRef, or logs the message when there is
// no object or no recorder (upstream's logIt).
func (m *imageManager) logIt(objRef *v1.ObjectReference, eventType, reason, prefix, msg string) {
	if objRef != nil && m.recorder != nil {
		m.recorder.Event(objRef, eventType, reason, msg)
		return
	}
	klog.InfoS(msg, "reason", reason, "for", prefix)
}

// shouldPullImage: Never never pulls, Always always does, IfNotPresent
// when the image is missing.
func shouldPullImage(policy v1.PullPolicy, present bool) bool {
	switch policy {
	case v1.PullNever:
		return false
	case v1.PullAlways:
		return true
	}
	return !present
}

// EnsureImageExists is upstream's steps: default the tag; unless the
// policy is Always, ask the runtime for the image; by pull policy, use it
// or refuse (Never) or pull; but not while this pod's pull of this image
// is backing off (a Normal "BackOff" event and ErrImagePullBackOff, whose
// message ends with the last failure's); a failed pull starts or doubles
// the back-off. The events and messages name the image as the pod spec
// does (imgRef, "nginx" not "nginx:latest"), as upstream's.
func (m *imageManager) EnsureImageExists(ctx context.Context, objRef *v1.ObjectReference, pod *v1.Pod, imgRef string, pullSecrets []v1.Secret,
	podSandboxConfig *runtimeapi.PodSandboxConfig, pullPolicy v1.PullPolicy) (string, string, error) {
	logPrefix := fmt.Sprintf("%s/%s/%s", pod.Namespace, pod.Name, imgRef)
	image, err := applyDefaultImageTag(imgRef)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", imgRef, err)
		m.logIt(objRef, v1.EventTypeWarning, events.FailedToInspectImage, logPrefix, msg)
		return "", msg, ErrInvalidImageName
	}
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: imgRef}
	if pullPolicy != v1.PullAlways { // Always pulls without asking (upstream's imagePullPrecheck)
		imageRef, err := m.imageService.GetImageRef(ctx, spec)
		if err != nil {
			msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
			m.logIt(objRef, v1.EventTypeWarning, events.FailedToInspectImage, logPrefix, msg)
			return "", msg, ErrImageInspect
		}
		if present := imageRef != ""; !shouldPullImage(pullPolicy, present) {
			if present {
				m.logIt(objRef, v1.EventTypeNormal, events.PulledImage, logPrefix, fmt.Sprintf("Container image %q already present on machine", imgRef))
				return imageRef, "", nil
			}
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", imgRef)
			m.logIt(objRef, v1.EventTypeWarning, events.ErrImageNeverPullPolicy, logPrefix, msg)
			return "", msg, ErrImageNeverPull
		}
	}

	backOffKey := fmt.Sprintf("%s_%s", pod.UID, imgRef)
	if m.backOff.IsInBackOffSinceUpdate(backOffKey, m.backOff.Clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", imgRef)
		m.logIt(objRef, v1.EventTypeNormal, BackOffPullImage, logPrefix, msg)
		if prev, ok := m.prevPullErrMsg.Load(backOffKey); ok {
			msg = fmt.Sprintf("%s: %s", msg, prev)
		}
		return "", msg, ErrImagePullBackOff
	}
	m.prevPullErrMsg.Delete(backOffKey) // a pull is tried: the map does not grow
	m.logIt(objRef, v1.EventTypeNormal, events.PullingImage, logPrefix, fmt.Sprintf("Pulling image %q", imgRef))
	result := m.puller.pullImage(ctx, spec, pullSecrets, podSandboxConfig)
	if result.err != nil {
		m.logIt(objRef, v1.EventTypeWarning, events.FailedToPullImage, logPrefix, fmt.Sprintf("Failed to pull image %q: %v", imgRef, result.err))
		m.backOff.Next(backOffKey, m.backOff.Clock.Now())
		msg, err := evalCRIPullErr(imgRef, result.err)
		m.prevPullErrMsg.Store(backOffKey, fmt.Sprintf("%s: %s", err, msg))
		return "", msg, err
	}
	m.logIt(objRef, v1.EventTypeNormal, events.PulledImage, logPrefix, fmt.Sprintf("Successfully pulled image %q in %v",
		imgRef, result.pullDuration.Round(time.Millisecond)))
	m.backOff.GC()
	return result.imageRef, "", nil
}

// evalCRIPullErr is the message and error of a failed pull: the
// registry's and the signature's failures have their own errors, as
// upstream; anything else is ErrImagePull with the error's text.
func evalCRIPullErr(imgRef string, err error) (string, error) {
	for _, known := range []struct {
		err  error
		says string
	}{
		{crierrors.ErrRegistryUnavailable, "the registry is unavailable"},
		{crierrors.ErrSignatureValidationFailed, "the signature validation failed"},
	} {
		if rest, ok := strings.CutPrefix(err.Error(), known.err.Error()); ok {
			return fmt.Sprintf("image pull failed for %s because %s%s", imgRef, known.says, rest), known.err
		}
	}
	return err.Error(), ErrImagePull
}

// applyDefaultImageTag adds ":latest" to an image with neither tag nor
// digest, as the kubelet does before asking the runtime.
func applyDefaultImageTag(image string) (string, error) {
	if image == "" || strings.ContainsAny(image, " \t\n") || strings.HasSuffix(image, "/") {
		return "", fmt.Errorf("invalid image name %q", image)
	}
	if strings.Contains(image, "@") {
		return image, nil // pinned by digest
	}
	if last := image[strings.LastIndex(image, "/")+1:]; !strings.Contains(last, ":") {
		return image + ":latest", nil
	}
	return image, nil
}
