package kubelet

import (
	"context"
	"fmt"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// podCIDRState is the pod CIDR the runtime last took (upstream keeps it in
// runtimeState, podCIDR and setPodCIDR, and serializes updatePodCIDR with
// updatePodCIDRMux; here one mutex does both).
type podCIDRState struct {
	mu   sync.Mutex
	cidr string
}

// updatePodCIDR hands the node's pod CIDR(s) (comma-separated, as
// tryUpdateNodeStatus joins spec.podCIDRs) to the runtime when they differ
// from the last ones it took, as upstream's updatePodCIDR: a CRI
// UpdateRuntimeConfig with NetworkConfig.PodCidr. They are remembered only
// when the runtime took them, so a failure is tried again at the next
// status update. It says whether they changed: true after a failed call
// too, as upstream (the node status is then written anyway). Upstream goes
// through the runtime manager (kubeGenericRuntimeManager.UpdatePodCIDR);
// the CRI call is the same. Without a runtime (no pod half) there is
// nothing to tell.
func (kl *Kubelet) updatePodCIDR(ctx context.Context, cidr string) (bool, error) {
	if kl.cri == nil || kl.runtimeState == nil {
		return false, nil
	}
	st := &kl.runtimeState.podCIDR
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cidr == cidr {
		return false, nil
	}
	logger := klog.FromContext(ctx)
	logger.Info("Updating runtime config through cri with podcidr", "CIDR", cidr)
	ctx, cancel := context.WithTimeout(ctx, runtimeStatusTimeout)
	defer cancel()
	_, err := kl.cri.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}},
	})
	if err != nil {
		return true, fmt.Errorf("failed to update pod CIDR: %w", err)
	}
	logger.Info("Updating Pod CIDR", "originalPodCIDR", st.cidr, "newPodCIDR", cidr)
	st.cidr = cidr
	return true, nil
}

// PodCIDR is the pod CIDR the runtime last took ("" before any).
func (kl *Kubelet) PodCIDR() string {
	if kl.runtimeState == nil {
		return ""
	}
	kl.runtimeState.podCIDR.mu.Lock()
	defer kl.runtimeState.podCIDR.mu.Unlock()
	return kl.runtimeState.podCIDR.cidr
}
