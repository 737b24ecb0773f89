package container

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestShouldContainerBeRestarted(t *testing.T) {
	now := metav1.Now()
	type status struct {
		state State
		exit  int
	}
	for _, tc := range []struct {
		name    string
		policy  v1.RestartPolicy
		status  *status // nil: never started (or collected)
		deleted bool
		want    bool
	}{
		{"never started, Always", v1.RestartPolicyAlways, nil, false, true},
		{"never started, Never", v1.RestartPolicyNever, nil, false, true},
		{"running", v1.RestartPolicyAlways, &status{ContainerStateRunning, 0}, false, false},
		{"created, Never", v1.RestartPolicyNever, &status{ContainerStateCreated, 0}, false, true},
		{"unknown, Never", v1.RestartPolicyNever, &status{ContainerStateUnknown, 0}, false, true},
		{"succeeded, Always", v1.RestartPolicyAlways, &status{ContainerStateExited, 0}, false, true},
		{"failed, Always", v1.RestartPolicyAlways, &status{ContainerStateExited, 1}, false, true},
		{"succeeded, OnFailure", v1.RestartPolicyOnFailure, &status{ContainerStateExited, 0}, false, false},
		{"failed, OnFailure", v1.RestartPolicyOnFailure, &status{ContainerStateExited, 137}, false, true},
		{"succeeded, Never", v1.RestartPolicyNever, &status{ContainerStateExited, 0}, false, false},
		{"failed, Never", v1.RestartPolicyNever, &status{ContainerStateExited, 1}, false, false},
		{"failed, Always, pod deleted", v1.RestartPolicyAlways, &status{ContainerStateExited, 1}, true, false},
		{"never started, pod deleted", v1.RestartPolicyAlways, nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tc.policy, Containers: []v1.Container{{Name: "app"}}}}
			if tc.deleted {
				pod.DeletionTimestamp = &now
			}
			ps := &PodStatus{}
			if tc.status != nil {
				// The newest status counts: an older attempt that failed is ignored.
				ps.ContainerStatuses = []*Status{
					{Name: "app", State: tc.status.state, ExitCode: tc.status.exit},
					{Name: "app", State: ContainerStateExited, ExitCode: 2},
				}
			}
			assert.Equal(t, tc.want, ShouldContainerBeRestarted(&pod.Spec.Containers[0], pod, ps))
		})
	}
}

func TestExpandContainerVolumeMountsNamesMissingVariables(t *testing.T) {
	envs := []EnvVar{{Name: "POD_NAME", Value: "web"}, {Name: "EMPTY", Value: ""}}
	got, err := ExpandContainerVolumeMounts(v1.VolumeMount{SubPathExpr: "logs/$(POD_NAME)/$$x"}, envs)
	if err != nil || got != "logs/web/$x" {
		t.Fatalf("got %q, %v; want logs/web/$x", got, err)
	}
	_, err = ExpandContainerVolumeMounts(v1.VolumeMount{SubPathExpr: "$(ZED)/$(EMPTY)/$(POD_NAME)"}, envs)
	if err == nil || err.Error() != "missing value for EMPTY, ZED" {
		t.Fatalf("got %v; want: missing value for EMPTY, ZED", err)
	}
}

// A container's own restartPolicy, and its restartPolicyRules first, win
// over the pod's (the e2e specs "Pod Extended (container restart policy)").
func TestContainerShouldRestart(t *testing.T) {
	never, always, onFailure := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure
	rule := func(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) []v1.ContainerRestartRule {
		return []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}}
	}
	for _, tc := range []struct {
		name   string
		pod    v1.RestartPolicy
		policy *v1.ContainerRestartPolicy
		rules  []v1.ContainerRestartRule
		exit   int32
		want   bool
	}{
		{"no policy of its own: the pod's Always", v1.RestartPolicyAlways, nil, nil, 1, true},
		{"no policy of its own: the pod's OnFailure, succeeded", v1.RestartPolicyOnFailure, nil, nil, 0, false},
		{"Never in an Always pod", v1.RestartPolicyAlways, &never, nil, 1, false},
		{"Always in a Never pod", v1.RestartPolicyNever, &always, nil, 0, true},
		{"OnFailure, failed", v1.RestartPolicyNever, &onFailure, nil, 3, true},
		{"Never, a rule In [42] matches 42", v1.RestartPolicyNever, &never, rule(v1.ContainerRestartRuleOnExitCodesOpIn, 42), 42, true},
		{"Never, a rule In [42] misses 1", v1.RestartPolicyAlways, &never, rule(v1.ContainerRestartRuleOnExitCodesOpIn, 42), 1, false},
		{"Never, a rule NotIn [0] matches 1", v1.RestartPolicyNever, &never, rule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0), 1, true},
		{"Never, a rule NotIn [0] misses 0", v1.RestartPolicyNever, &never, rule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0), 0, false},
		{"rules without a policy of its own are not read", v1.RestartPolicyNever, nil, rule(v1.ContainerRestartRuleOnExitCodesOpIn, 42), 42, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", RestartPolicy: tc.policy, RestartPolicyRules: tc.rules}
			assert.Equal(t, tc.want, ContainerShouldRestart(c, &v1.PodSpec{RestartPolicy: tc.pod}, tc.exit))
			pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tc.pod, Containers: []v1.Container{*c}}}
			ps := &PodStatus{ContainerStatuses: []*Status{{Name: "app", State: ContainerStateExited, ExitCode: int(tc.exit)}}}
			assert.Equal(t, tc.want, ShouldContainerBeRestarted(c, pod, ps))
		})
	}
}
