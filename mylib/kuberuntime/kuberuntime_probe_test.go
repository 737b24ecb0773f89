package kuberuntime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"

	kubecontainer "mykubelet/mylib/container"
	proberesults "mykubelet/mylib/prober/results"
)

type probeResults map[kubecontainer.ContainerID]proberesults.Result

func (p probeResults) Get(id kubecontainer.ContainerID) (proberesults.Result, bool) {
	r, ok := p[id]
	return r, ok
}

// TestComputePodActionsKillsOnAFailedProbe: a failed liveness or startup
// probe kills the running container with upstream's message, and starts
// it again unless the restart policy is Never; the probe's
// terminationGracePeriodSeconds is the kill's grace period.
func TestComputePodActionsKillsOnAFailedProbe(t *testing.T) {
	grace := int64(3)
	for _, tc := range []struct {
		name        string
		policy      v1.RestartPolicy
		liveness    proberesults.Result
		startup     proberesults.Result
		wantMessage string
		wantStart   []int
		wantGrace   *int64
	}{
		{name: "liveness failed, Always", policy: v1.RestartPolicyAlways, liveness: proberesults.Failure, startup: proberesults.Success,
			wantMessage: "Container a failed liveness probe, will be restarted", wantStart: []int{0}, wantGrace: &grace},
		{name: "liveness failed, OnFailure", policy: v1.RestartPolicyOnFailure, liveness: proberesults.Failure, startup: proberesults.Success,
			wantMessage: "Container a failed liveness probe, will be restarted", wantStart: []int{0}, wantGrace: &grace},
		{name: "liveness failed, Never", policy: v1.RestartPolicyNever, liveness: proberesults.Failure, startup: proberesults.Success,
			wantMessage: "Container a failed liveness probe", wantGrace: &grace},
		{name: "startup failed", policy: v1.RestartPolicyAlways, liveness: proberesults.Success, startup: proberesults.Failure,
			wantMessage: "Container a failed startup probe, will be restarted", wantStart: []int{0}},
		{name: "both passing", policy: v1.RestartPolicyAlways, liveness: proberesults.Success, startup: proberesults.Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(tc.policy, nil, "a")
			pod.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: &grace}
			pod.Spec.Containers[0].StartupProbe = &v1.Probe{}
			a := running(pod, "a")
			m := &Manager{livenessManager: probeResults{a.ID: tc.liveness}, startupManager: probeResults{a.ID: tc.startup}}
			got := m.computePodActions(pod, podStatusOf(ready(), a))
			// Never: nothing is left to run, so the whole pod is killed, as upstream.
			assert.Equal(t, tc.policy == v1.RestartPolicyNever, got.KillPod)
			assert.Equal(t, tc.wantStart, got.ContainersToStart)
			if tc.wantMessage == "" {
				assert.Empty(t, got.ContainersToKill)
				return
			}
			info, ok := got.ContainersToKill[a.ID]
			if assert.True(t, ok) {
				assert.Equal(t, tc.wantMessage, info.message)
				assert.Equal(t, tc.wantGrace, info.gracePeriodOverride)
			}
		})
	}
}
