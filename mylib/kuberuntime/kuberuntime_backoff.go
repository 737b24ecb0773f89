package kuberuntime

// CrashLoopBackOff: how long a container that keeps exiting waits before
// the kubelet starts it again.
//
// The figures are upstream's defaults at v1.37, read in
// pkg/kubelet/kubelet.go (initialCrashLoopBackOff, MaxCrashLoopBackOff,
// newCrashLoopBackOff, and the HasExpiredFunc set where NewMainKubelet
// builds crashLoopBackOff) and pkg/features/kube_features.go:
//
//   - initial delay 10 s, doubling, capped at 300 s (5 min);
//   - the gate ReduceDefaultCrashLoopBackOffDecay (1 s → 60 s) is alpha
//     and off by default, so it does not apply;
//   - the gate KubeletCrashLoopBackOffMax is beta and on by default, but it
//     only applies a node's crashLoopBackOff.maxContainerRestartPeriod,
//     whose default is the same 300 s (MaxContainerBackOff);
//   - a container's back-off is forgotten once it ran 600 s (10 min)
//     after its last failure: upstream sets HasExpiredFunc to a flat
//     600 s, which is client-go's 2 × max with the default max.
//
// The first exit restarts at once: flowcontrol.Backoff only starts
// counting at that restart (doBackOff calls Next), so the waits are
// 0, 10, 20, 40, 80, 160, 300, 300 … seconds.

import (
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
)

const (
	// InitialCrashLoopBackOff is the first back-off of a restarted
	// container (upstream initialCrashLoopBackOff).
	InitialCrashLoopBackOff = 10 * time.Second
	// MaxCrashLoopBackOff is the cap of the back-off (upstream
	// MaxCrashLoopBackOff = v1beta1.MaxContainerBackOff).
	MaxCrashLoopBackOff = 300 * time.Second
	// CrashLoopBackOffResetAfter is how long after its last failure a
	// container's back-off is forgotten (upstream's HasExpiredFunc).
	CrashLoopBackOffResetAfter = 600 * time.Second
)

// NewCrashLoopBackOff returns the back-off the kubelet passes to every
// SyncPod, as upstream builds it: InitialCrashLoopBackOff doubling to
// MaxCrashLoopBackOff, no jitter, an entry forgotten
// CrashLoopBackOffResetAfter after its last update. clk drives it (a fake
// clock in tests); the kubelet should call its GC now and then to drop
// expired entries.
func NewCrashLoopBackOff(clk clock.Clock) *flowcontrol.Backoff {
	b := flowcontrol.NewFakeBackOff(InitialCrashLoopBackOff, MaxCrashLoopBackOff, clk)
	b.HasExpiredFunc = func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
		return eventTime.Sub(lastUpdate) > CrashLoopBackOffResetAfter
	}
	return b
}

// GetStableKey is the back-off key of a container: its pod (name,
// namespace, uid), its name and the hash of its spec, so that a pod
// recreated under the same name, or an edited container, starts afresh
// (upstream GetStableKey in pkg/kubelet/kuberuntime/helpers.go).
func GetStableKey(pod *v1.Pod, container *v1.Container) string {
	return fmt.Sprintf("%s_%s_%s_%s_%s", pod.Name, pod.Namespace, pod.UID, container.Name,
		strconv.FormatUint(kubecontainer.HashContainer(container), 16))
}
