package kubelet

// activeDeadlineSeconds: a pod that has been active on the node longer
// than its spec.activeDeadlineSeconds is failed with reason
// DeadlineExceeded, as upstream's pkg/kubelet/active_deadline.go
// (activeDeadlineHandler) and the PodSyncHandlers loop of
// generateAPIPodStatus in pkg/kubelet/kubelet_pods.go. The clock starts at
// the pod's status.startTime, which the status manager sets when the
// kubelet first syncs the pod.
//
// Where it departs from upstream, and why (one line each):
//   - the handler interfaces live here, not in pkg/kubelet/lifecycle: the
//     kubelet is their only user;
//   - applyPodSyncHandlers is a function the caller runs on the status
//     generateAPIPodStatus returned, so that generateAPIPodStatus keeps its
//     explicit arguments.

import (
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"mykubelet/mylib/events"
)

// The message of a pod failed for its active deadline (reason
// events.DeadlineExceeded), as upstream.
const deadlineExceededMessage = "Pod was active on the node longer than the specified deadline"

// ShouldEvictResponse says whether a pod must be failed, and why
// (upstream lifecycle.ShouldEvictResponse).
type ShouldEvictResponse struct {
	Evict   bool
	Reason  string
	Message string
}

// PodSyncHandler is asked, each time a pod's status is generated, whether
// the pod must be failed (upstream lifecycle.PodSyncHandler).
type PodSyncHandler interface {
	ShouldEvict(pod *v1.Pod) ShouldEvictResponse
}

// PodSyncLoopHandler is asked, at each sync tick, whether a pod needs a
// sync even with nothing new about it (upstream lifecycle.PodSyncLoopHandler):
// a pod whose deadline passed must be synced to be failed.
type PodSyncLoopHandler interface {
	ShouldSync(pod *v1.Pod) bool
}

// PodStatusProvider gives the latest status the kubelet computed for a
// pod (the status manager's GetPodStatus).
type PodStatusProvider interface {
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
}

// activeDeadlineHandler fails pods past their activeDeadlineSeconds.
type activeDeadlineHandler struct {
	clock             clock.Clock
	podStatusProvider PodStatusProvider
	recorder          record.EventRecorder
}

var (
	_ PodSyncHandler     = (*activeDeadlineHandler)(nil)
	_ PodSyncLoopHandler = (*activeDeadlineHandler)(nil)
)

// newActiveDeadlineHandler returns the handler; all arguments are required.
func newActiveDeadlineHandler(podStatusProvider PodStatusProvider, recorder record.EventRecorder, clk clock.Clock) (*activeDeadlineHandler, error) {
	if podStatusProvider == nil || recorder == nil || clk == nil {
		return nil, errors.New("active deadline handler: a pod status provider, a recorder and a clock are required")
	}
	return &activeDeadlineHandler{clock: clk, podStatusProvider: podStatusProvider, recorder: recorder}, nil
}

// ShouldSync is true once the pod is past its deadline.
func (m *activeDeadlineHandler) ShouldSync(pod *v1.Pod) bool {
	return m.pastActiveDeadline(pod)
}

// ShouldEvict fails a pod past its deadline, with a DeadlineExceeded event.
func (m *activeDeadlineHandler) ShouldEvict(pod *v1.Pod) ShouldEvictResponse {
	if !m.pastActiveDeadline(pod) {
		return ShouldEvictResponse{}
	}
	m.recorder.Event(pod, v1.EventTypeNormal, events.DeadlineExceeded, deadlineExceededMessage)
	return ShouldEvictResponse{Evict: true, Reason: events.DeadlineExceeded, Message: deadlineExceededMessage}
}

// pastActiveDeadline: the pod has a deadline, a start time (the kubelet's
// latest status, else the pod's own), and has been active at least that long.
func (m *activeDeadlineHandler) pastActiveDeadline(pod *v1.Pod) bool {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return false
	}
	podStatus, ok := m.podStatusProvider.GetPodStatus(pod.UID)
	if !ok {
		podStatus = pod.Status
	}
	if podStatus.StartTime.IsZero() {
		return false
	}
	allowed := time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second
	return m.clock.Since(podStatus.StartTime.Time) >= allowed
}

// applyPodSyncHandlers fails the generated status s of pod if a handler
// says so (the first one that does gives the reason and message), as
// upstream's generateAPIPodStatus does with kl.PodSyncHandlers.
func applyPodSyncHandlers(handlers []PodSyncHandler, pod *v1.Pod, s *v1.PodStatus) {
	for _, h := range handlers {
		if r := h.ShouldEvict(pod); r.Evict {
			s.Phase, s.Reason, s.Message = v1.PodFailed, r.Reason, r.Message
			return
		}
	}
}
