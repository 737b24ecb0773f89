// The prober's side of the Kubelet, when Config.Pods.Probes is set: a
// probe manager (mylib/prober) whose results the sync loop reads (upstream
// handleProbeSync in pkg/kubelet/kubelet.go). Upstream also writes a
// readiness change straight into the status manager
// (SetContainerReadiness); here the sync it triggers does, through
// generateAPIPodStatus, which asks the prober (UpdatePodStatus).

package kubelet

import (
	"context"
	"net/netip"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/prober"
	proberesults "mykubelet/mylib/prober/results"
)

// newProbeManager makes the probe manager, which writes the three results
// managers (made with the runtime manager, which reads two of them), reads
// the pods' statuses from the status manager and runs exec probes through
// the runtime's CRI. A guarded dial (prober.GuardedDialer) also reaches
// the pod IPs the runtime reports for this node's pods (isPodIP).
func (kl *Kubelet) newProbeManager(dial prober.DialFunc) error {
	dial = prober.AllowPodIPs(dial, kl.isPodIP)
	pm, err := prober.NewManager(prober.Config{
		StatusManager:   kl.statusManager,
		LivenessManager: kl.livenessManager, ReadinessManager: kl.readinessManager, StartupManager: kl.startupManager,
		Runtime: kl.cri, Recorder: kl.recorder, Clock: kl.clock, Dial: dial, Metrics: kl.metrics,
	})
	if err != nil {
		return err
	}
	kl.probeManager = pm
	return nil
}

// isPodIP: ip is one of the pod IPs the runtime reports (the status
// manager's status.podIPs) for a pod of this node that does not use the
// node's network.
func (kl *Kubelet) isPodIP(ip netip.Addr) bool {
	return podsHaveIP(kl.podManager.GetPods(), kl.nodeName, kl.statusManager.GetPodStatus, ip)
}

// podsHaveIP: ip is in status.podIPs (status's, else the pod's own) of
// one of pods that is bound to nodeName and not hostNetwork.
func podsHaveIP(pods []*v1.Pod, nodeName string, status func(types.UID) (v1.PodStatus, bool), ip netip.Addr) bool {
	for _, p := range pods {
		if p.Spec.NodeName != nodeName || p.Spec.HostNetwork {
			continue
		}
		st, ok := status(p.UID)
		if !ok {
			st = p.Status
		}
		for _, pip := range st.PodIPs {
			if a, err := netip.ParseAddr(pip.IP); err == nil && a.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// updates is m's channel, or nil (never ready) without probes.
func updates(m proberesults.Manager) <-chan proberesults.Update {
	if m == nil {
		return nil
	}
	return m.Updates()
}

// handleProbeSync syncs the pod whose probe result changed, and says so
// with upstream's log line: a liveness or startup failure then has the
// runtime manager kill and restart the container; a readiness change
// reaches the pod's status.
func (kl *Kubelet) handleProbeSync(ctx context.Context, u proberesults.Update, probe, status string) {
	pod, ok := kl.podManager.GetPodByUID(u.PodUID)
	if !ok {
		return // gone already
	}
	kl.printf("SyncLoop (probe) probe=%q status=%q pod=%q", probe, status, pod.Namespace+"/"+pod.Name)
	kl.HandlePodSyncs(ctx, []*v1.Pod{pod})
}

// stopProbes stops the probe workers once the sync loop has stopped,
// reading what they still send so that none blocks on a full channel.
func (kl *Kubelet) stopProbes() {
	if kl.probeManager == nil {
		return
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for {
			select {
			case <-kl.livenessManager.Updates():
			case <-kl.readinessManager.Updates():
			case <-kl.startupManager.Updates():
			case <-done:
				return
			}
		}
	})
	kl.probeManager.Close()
	close(done)
}
