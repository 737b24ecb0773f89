package kuberuntime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
)

func testPod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return pod
}

func sandboxStatus(id string, attempt uint32, ready bool) *runtimeapi.PodSandboxStatus {
	s := &runtimeapi.PodSandboxStatus{
		Id:       id,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1", Attempt: attempt},
		State:    runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		Network:  &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.2"},
	}
	if ready {
		s.State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return s
}

// running and exited build container statuses whose hash matches the pod's spec.
func running(pod *v1.Pod, name string) *kubecontainer.Status {
	return &kubecontainer.Status{ID: kubecontainer.ContainerID{Type: "fake", ID: "c-" + name}, Name: name,
		State: kubecontainer.ContainerStateRunning, Hash: hashOf(pod, name)}
}

func exited(pod *v1.Pod, name string, code int) *kubecontainer.Status {
	s := running(pod, name)
	s.State, s.ExitCode = kubecontainer.ContainerStateExited, code
	return s
}

func hashOf(pod *v1.Pod, name string) uint64 {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return kubecontainer.HashContainer(&list[i])
			}
		}
	}
	return 0
}

func podStatusOf(sandboxes []*runtimeapi.PodSandboxStatus, containers ...*kubecontainer.Status) *kubecontainer.PodStatus {
	return &kubecontainer.PodStatus{ID: "uid-1", Name: "web", Namespace: "default", SandboxStatuses: sandboxes, ContainerStatuses: containers}
}

func ready() []*runtimeapi.PodSandboxStatus {
	return []*runtimeapi.PodSandboxStatus{sandboxStatus("s1", 0, true)}
}

func TestComputePodActions(t *testing.T) {
	always := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	onFailure := testPod(v1.RestartPolicyOnFailure, nil, "a", "b")
	never := testPod(v1.RestartPolicyNever, nil, "a", "b")
	withInits := testPod(v1.RestartPolicyAlways, []string{"i0", "i1"}, "a")
	withInitsNever := testPod(v1.RestartPolicyNever, []string{"i0", "i1"}, "a")
	deleting := testPod(v1.RestartPolicyAlways, nil, "a")
	deleting.DeletionTimestamp = &metav1.Time{}
	changedSpec := testPod(v1.RestartPolicyAlways, nil, "a")
	oldHash := running(changedSpec, "a")
	changedSpec.Spec.Containers[0].Image = "busybox:1.37"

	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		status *kubecontainer.PodStatus
		want   podActions
	}{
		{"fresh pod: a sandbox, then every container", always, podStatusOf(nil),
			podActions{KillPod: true, CreateSandbox: true, ContainersToStart: []int{0, 1}}},
		{"sandbox gone: a new one, attempt + 1, every container", always,
			podStatusOf([]*runtimeapi.PodSandboxStatus{sandboxStatus("s1", 0, false)}, exited(always, "a", 137), exited(always, "b", 137)),
			podActions{KillPod: true, CreateSandbox: true, SandboxID: "s1", Attempt: 1, ContainersToStart: []int{0, 1}}},
		{"sandbox gone, OnFailure: succeeded containers stay done", onFailure,
			podStatusOf([]*runtimeapi.PodSandboxStatus{sandboxStatus("s1", 2, false)}, exited(onFailure, "a", 0), exited(onFailure, "b", 1)),
			podActions{KillPod: true, CreateSandbox: true, SandboxID: "s1", Attempt: 3, ContainersToStart: []int{1}}},
		{"sandbox gone, Never, after it ran: no new sandbox", never,
			podStatusOf([]*runtimeapi.PodSandboxStatus{sandboxStatus("s1", 0, false)}, exited(never, "a", 0), exited(never, "b", 0)),
			podActions{KillPod: true, SandboxID: "s1", Attempt: 1}},
		{"two ready sandboxes: replace", always,
			podStatusOf([]*runtimeapi.PodSandboxStatus{sandboxStatus("s2", 1, true), sandboxStatus("s1", 0, true)}, running(always, "a"), running(always, "b")),
			podActions{KillPod: true, CreateSandbox: true, SandboxID: "s2", Attempt: 2, ContainersToStart: []int{0, 1}}},
		{"all running: nothing to do", always, podStatusOf(ready(), running(always, "a"), running(always, "b")),
			podActions{SandboxID: "s1"}},
		{"one container not started yet: start it", always, podStatusOf(ready(), running(always, "a")),
			podActions{SandboxID: "s1", ContainersToStart: []int{1}}},
		{"Always: exited 0 is restarted", always, podStatusOf(ready(), running(always, "a"), exited(always, "b", 0)),
			podActions{SandboxID: "s1", ContainersToStart: []int{1}}},
		{"Always: exited 1 is restarted", always, podStatusOf(ready(), running(always, "a"), exited(always, "b", 1)),
			podActions{SandboxID: "s1", ContainersToStart: []int{1}}},
		{"OnFailure: exited 1 is restarted", onFailure, podStatusOf(ready(), running(onFailure, "a"), exited(onFailure, "b", 1)),
			podActions{SandboxID: "s1", ContainersToStart: []int{1}}},
		{"OnFailure: exited 0 is not", onFailure, podStatusOf(ready(), running(onFailure, "a"), exited(onFailure, "b", 0)),
			podActions{SandboxID: "s1"}},
		{"Never: exited 1 is not", never, podStatusOf(ready(), running(never, "a"), exited(never, "b", 1)),
			podActions{SandboxID: "s1"}},
		{"Never: all exited: kill the pod", never, podStatusOf(ready(), exited(never, "a", 0), exited(never, "b", 1)),
			podActions{KillPod: true, SandboxID: "s1"}},
		{"OnFailure: all succeeded: kill the pod", onFailure, podStatusOf(ready(), exited(onFailure, "a", 0), exited(onFailure, "b", 0)),
			podActions{KillPod: true, SandboxID: "s1"}},
		{"being deleted: an exited container is not restarted", deleting, podStatusOf(ready(), exited(deleting, "a", 1)),
			podActions{KillPod: true, SandboxID: "s1"}},
		{"spec changed: replace the container", changedSpec, podStatusOf(ready(), oldHash),
			podActions{SandboxID: "s1", ContainersToStart: []int{0}, ContainersToKill: map[kubecontainer.ContainerID]containerToKillInfo{
				oldHash.ID: {container: &kubecontainer.Container{ID: oldHash.ID, Name: "a"}, name: "a", message: "Container a definition changed, will be restarted"}}}},
		{"init containers: a fresh pod starts the first only", withInits, podStatusOf(nil),
			podActions{KillPod: true, CreateSandbox: true, InitContainersToStart: []int{0}}},
		{"init containers: the first still runs: wait", withInits, podStatusOf(ready(), running(withInits, "i0")),
			podActions{SandboxID: "s1"}},
		{"init containers: the first completed: the second", withInits, podStatusOf(ready(), exited(withInits, "i0", 0)),
			podActions{SandboxID: "s1", InitContainersToStart: []int{1}}},
		{"init containers: all completed: the regular containers", withInits,
			podStatusOf(ready(), exited(withInits, "i1", 0), exited(withInits, "i0", 0)),
			podActions{SandboxID: "s1", ContainersToStart: []int{0}}},
		{"init containers: a failed one is retried under Always", withInits,
			podStatusOf(ready(), exited(withInits, "i1", 1), exited(withInits, "i0", 0)),
			podActions{SandboxID: "s1", InitContainersToStart: []int{1}}},
		{"init containers: a failed one under Never kills the pod", withInitsNever,
			podStatusOf(ready(), exited(withInitsNever, "i0", 1)),
			podActions{KillPod: true, SandboxID: "s1"}},
		{"init containers: a running regular container means they are done", withInits,
			podStatusOf(ready(), running(withInits, "a")),
			podActions{SandboxID: "s1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want.ContainersToKill == nil {
				tc.want.ContainersToKill = map[kubecontainer.ContainerID]containerToKillInfo{}
			}
			got := (&Manager{}).computePodActions(tc.pod, tc.status)
			assert.Equal(t, tc.want, got)
		})
	}
}
