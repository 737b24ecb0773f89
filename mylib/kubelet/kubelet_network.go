package kubelet

import "context"

// updatePodCIDR hands the node's pod CIDR(s) (comma-separated) to the
// runtime, and says whether they changed. TODO(seam): nothing yet.
func (kl *Kubelet) updatePodCIDR(ctx context.Context, cidr string) (bool, error) {
	return false, nil
}
