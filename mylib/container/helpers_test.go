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
