// The prober's side of the Kubelet, when Config.Pods.Probes is set: a
// probe manager (mylib/prober) whose results the sync loop reads (upstream
// handleProbeSync in pkg/kubelet/kubelet.go). Upstream also writes a
// readiness change straight into the status manager
// (SetContainerReadiness); here the sync it triggers does, through
// generateAPIPodStatus, which asks the prober (UpdatePodStatus).

package kubelet

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/prober"
	proberesults "mykubelet/mylib/prober/results"
)

// newProbeManager makes the probe manager, which writes the three results
// managers (made with the runtime manager, which reads two of them), reads
// the pods' statuses from the status manager and runs exec probes through
// the runtime's CRI.
func (kl *Kubelet) newProbeManager(dial prober.DialFunc) error {
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
