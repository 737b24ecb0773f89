package kubelet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/status"
)

var podT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func running(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func terminated(name string, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
}

func waiting(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ContainerCreating}}}
}

func waitingAfter(name string, code int32) v1.ContainerStatus {
	s := waiting(name)
	s.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: code}
	return s
}

func phasePod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-1"}, Spec: v1.PodSpec{RestartPolicy: policy}}
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return pod
}

// ownPolicy is pod (a copy) with container name's own restartPolicy.
func ownPolicy(pod *v1.Pod, name string, p v1.ContainerRestartPolicy) *v1.Pod {
	pod = pod.DeepCopy()
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			pod.Spec.Containers[i].RestartPolicy = &p
		}
	}
	return pod
}

func TestGetPhase(t *testing.T) {
	always := phasePod(v1.RestartPolicyAlways, nil, "a", "b")
	onFailure := phasePod(v1.RestartPolicyOnFailure, nil, "a", "b")
	never := phasePod(v1.RestartPolicyNever, nil, "a", "b")
	initAlways := phasePod(v1.RestartPolicyAlways, []string{"i"}, "a")
	initNever := phasePod(v1.RestartPolicyNever, []string{"i"}, "a")
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		info     []v1.ContainerStatus
		terminal bool
		want     v1.PodPhase
	}{
		{"no statuses yet", always, nil, false, v1.PodPending},
		{"one waiting", always, []v1.ContainerStatus{running("a"), waiting("b")}, false, v1.PodPending},
		{"all running", always, []v1.ContainerStatus{running("a"), running("b")}, false, v1.PodRunning},
		{"one running, one unknown", always, []v1.ContainerStatus{running("a")}, false, v1.PodPending},
		{"running and succeeded", never, []v1.ContainerStatus{running("a"), terminated("b", 0)}, false, v1.PodRunning},
		{"Always: all exited, restarting", always, []v1.ContainerStatus{terminated("a", 0), terminated("b", 1)}, false, v1.PodRunning},
		{"Always: all exited and terminal", always, []v1.ContainerStatus{terminated("a", 0), terminated("b", 1)}, true, v1.PodFailed},
		{"Always: all succeeded and terminal", always, []v1.ContainerStatus{terminated("a", 0), terminated("b", 0)}, true, v1.PodSucceeded},
		{"Never: all succeeded", never, []v1.ContainerStatus{terminated("a", 0), terminated("b", 0)}, false, v1.PodSucceeded},
		{"Never: one failed", never, []v1.ContainerStatus{terminated("a", 0), terminated("b", 2)}, false, v1.PodFailed},
		{"Always, but a's own policy is Never: a failed, for good", ownPolicy(always, "a", v1.ContainerRestartPolicyNever),
			[]v1.ContainerStatus{terminated("a", 1), terminated("b", 1)}, false, v1.PodRunning},
		{"Always, every container's own policy Never", ownPolicy(ownPolicy(always, "a", v1.ContainerRestartPolicyNever), "b", v1.ContainerRestartPolicyNever),
			[]v1.ContainerStatus{terminated("a", 0), terminated("b", 1)}, false, v1.PodFailed},
		{"Never, but b's own policy is Always: restarting", ownPolicy(never, "b", v1.ContainerRestartPolicyAlways),
			[]v1.ContainerStatus{terminated("a", 0), terminated("b", 0)}, false, v1.PodRunning},
		{"OnFailure: all succeeded", onFailure, []v1.ContainerStatus{terminated("a", 0), terminated("b", 0)}, false, v1.PodSucceeded},
		{"OnFailure: one failed, restarting", onFailure, []v1.ContainerStatus{terminated("a", 0), terminated("b", 1)}, false, v1.PodRunning},
		{"waiting after a crash counts as stopped", always, []v1.ContainerStatus{waitingAfter("a", 1), waitingAfter("b", 1)}, false, v1.PodRunning},
		{"init container running", initAlways, []v1.ContainerStatus{running("i"), waiting("a")}, false, v1.PodPending},
		{"init container done, container running", initAlways, []v1.ContainerStatus{terminated("i", 0), running("a")}, false, v1.PodRunning},
		{"Never: init container failed", initNever, []v1.ContainerStatus{terminated("i", 1), waiting("a")}, false, v1.PodFailed},
		{"Always: init container failed, retried", initAlways, []v1.ContainerStatus{waitingAfter("i", 1), waiting("a")}, false, v1.PodPending},
		{"OnFailure: all failed and terminal", onFailure, []v1.ContainerStatus{terminated("a", 1), terminated("b", 1)}, true, v1.PodFailed},
		{"OnFailure: one succeeded, one in CrashLoopBackOff", onFailure, []v1.ContainerStatus{terminated("a", 0), waitingAfter("b", 1)}, false, v1.PodRunning},
		{"Never: one failed, one still running", never, []v1.ContainerStatus{terminated("a", 1), running("b")}, false, v1.PodRunning},
		{"Never: all failed", never, []v1.ContainerStatus{terminated("a", 1), terminated("b", 137)}, false, v1.PodFailed},
		{"OnFailure: init container failed, retried", phasePod(v1.RestartPolicyOnFailure, []string{"i"}, "a"), []v1.ContainerStatus{waitingAfter("i", 1), waiting("a")}, false, v1.PodPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, getPhase(tc.pod, tc.info, tc.terminal, false))
		})
	}
}

func sandbox() []*runtimeapi.PodSandboxStatus {
	return []*runtimeapi.PodSandboxStatus{{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{}, Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.2"}}}
}

func rtStatus(name, id string, state kubecontainer.State, exit, restarts int, at time.Time) *kubecontainer.Status {
	s := &kubecontainer.Status{ID: kubecontainer.ContainerID{Type: "fake", ID: id}, Name: name, State: state,
		Image: "busybox:latest", ImageRef: "sha256:bb", CreatedAt: at, StartedAt: at, RestartCount: restarts}
	if state == kubecontainer.ContainerStateExited {
		s.FinishedAt, s.ExitCode, s.Reason = at.Add(time.Second), exit, "Error"
		if exit == 0 {
			s.Reason = "Completed"
		}
	}
	return s
}

func condition(s v1.PodStatus, t v1.PodConditionType) v1.PodCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

func TestGenerateAPIPodStatusWhileInitializing(t *testing.T) {
	pod := phasePod(v1.RestartPolicyAlways, []string{"init"}, "app")
	ps := &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{"10.88.0.2"}, SandboxStatuses: sandbox(),
		ContainerStatuses: []*kubecontainer.Status{rtStatus("init", "c1", kubecontainer.ContainerStateRunning, 0, 0, podT0)}}
	s := generateAPIPodStatus(pod, ps, v1.PodStatus{}, false, []string{"127.0.0.1"}, nil)

	assert.Equal(t, v1.PodPending, s.Phase)
	assert.Equal(t, "10.88.0.2", s.PodIP)
	assert.Equal(t, []v1.PodIP{{IP: "10.88.0.2"}}, s.PodIPs)
	assert.Equal(t, "127.0.0.1", s.HostIP)
	assert.Equal(t, []v1.HostIP{{IP: "127.0.0.1"}}, s.HostIPs)
	assert.Equal(t, v1.PodQOSBestEffort, s.QOSClass)
	require.Len(t, s.InitContainerStatuses, 1)
	assert.NotNil(t, s.InitContainerStatuses[0].State.Running)
	assert.False(t, s.InitContainerStatuses[0].Ready)
	assert.Equal(t, "fake://c1", s.InitContainerStatuses[0].ContainerID)
	require.Len(t, s.ContainerStatuses, 1)
	assert.Equal(t, PodInitializing, s.ContainerStatuses[0].State.Waiting.Reason)
	assert.Equal(t, "busybox", s.ContainerStatuses[0].Image)
	assert.Equal(t, v1.ConditionTrue, condition(s, v1.PodReadyToStartContainers).Status)
	assert.Equal(t, v1.ConditionFalse, condition(s, v1.PodInitialized).Status)
	assert.Equal(t, "containers with incomplete status: [init]", condition(s, v1.PodInitialized).Message)
	assert.Equal(t, v1.ConditionFalse, condition(s, v1.PodReady).Status)
	assert.Equal(t, v1.ConditionFalse, condition(s, v1.ContainersReady).Status)
	assert.Equal(t, v1.ConditionTrue, condition(s, v1.PodScheduled).Status)
}

// TestGenerateAPIPodStatusObservesTheGeneration: the status says which
// generation of the pod's spec it describes, and so does each condition
// the kubelet writes; a condition someone else owns (a readiness gate's)
// keeps its own.
func TestGenerateAPIPodStatusObservesTheGeneration(t *testing.T) {
	pod := phasePod(v1.RestartPolicyAlways, nil, "app")
	pod.Generation = 3
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/ready"}}
	pod.Status.Conditions = []v1.PodCondition{{Type: "example.com/ready", Status: v1.ConditionTrue, ObservedGeneration: 1}}
	ps := &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{"10.88.0.2"}, SandboxStatuses: sandbox(),
		ContainerStatuses: []*kubecontainer.Status{rtStatus("app", "c1", kubecontainer.ContainerStateRunning, 0, 0, podT0)}}
	s := generateAPIPodStatus(pod, ps, v1.PodStatus{ObservedGeneration: 2}, false, []string{"127.0.0.1"}, nil)

	assert.EqualValues(t, 3, s.ObservedGeneration)
	for _, c := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
		assert.EqualValues(t, 3, condition(s, c).ObservedGeneration, c)
	}
	assert.EqualValues(t, 1, condition(s, "example.com/ready").ObservedGeneration, "not the kubelet's condition")
}

func TestGenerateAPIPodStatusRunningAfterARestart(t *testing.T) {
	pod := phasePod(v1.RestartPolicyAlways, []string{"init"}, "app")
	ps := &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{"10.88.0.2"}, SandboxStatuses: sandbox(),
		ContainerStatuses: []*kubecontainer.Status{ // newest first
			rtStatus("app", "c3", kubecontainer.ContainerStateRunning, 0, 1, podT0.Add(20*time.Second)),
			rtStatus("app", "c2", kubecontainer.ContainerStateExited, 1, 0, podT0.Add(10*time.Second)),
			rtStatus("init", "c1", kubecontainer.ContainerStateExited, 0, 0, podT0),
		}}
	s := generateAPIPodStatus(pod, ps, v1.PodStatus{}, false, []string{"127.0.0.1"}, nil)

	assert.Equal(t, v1.PodRunning, s.Phase)
	app := s.ContainerStatuses[0]
	assert.Equal(t, "fake://c3", app.ContainerID)
	assert.Equal(t, metav1.NewTime(podT0.Add(20*time.Second)), app.State.Running.StartedAt)
	assert.EqualValues(t, 1, app.RestartCount)
	assert.True(t, app.Ready)
	assert.True(t, *app.Started)
	assert.Equal(t, "busybox:latest", app.Image)
	assert.Equal(t, "sha256:bb", app.ImageID)
	require.NotNil(t, app.LastTerminationState.Terminated, "the previous container is the last state")
	assert.EqualValues(t, 1, app.LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, "Error", app.LastTerminationState.Terminated.Reason)
	assert.Equal(t, "fake://c2", app.LastTerminationState.Terminated.ContainerID)
	initSt := s.InitContainerStatuses[0]
	assert.True(t, initSt.Ready, "a completed init container is ready")
	assert.Equal(t, "Completed", initSt.State.Terminated.Reason)
	for _, c := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
		assert.Equal(t, v1.ConditionTrue, condition(s, c).Status, c)
	}
}

func TestGenerateAPIPodStatusShowsCrashLoopBackOff(t *testing.T) {
	pod := phasePod(v1.RestartPolicyAlways, nil, "app")
	ps := &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{"10.88.0.2"}, SandboxStatuses: sandbox(),
		ContainerStatuses: []*kubecontainer.Status{rtStatus("app", "c2", kubecontainer.ContainerStateExited, 1, 3, podT0)}}
	reasons := NewReasonCache()
	reasons.Update(pod.UID, kubecontainer.PodSyncResult{SyncResults: []*kubecontainer.SyncResult{{
		Action: kubecontainer.StartContainer, Target: "app", Error: kubecontainer.ErrCrashLoopBackOff, Message: "back-off 40s"}}})
	s := generateAPIPodStatus(pod, ps, v1.PodStatus{}, false, nil, reasons)
	app := s.ContainerStatuses[0]
	assert.Equal(t, "CrashLoopBackOff", app.State.Waiting.Reason)
	assert.Equal(t, "back-off 40s", app.State.Waiting.Message)
	assert.EqualValues(t, 1, app.LastTerminationState.Terminated.ExitCode)
	assert.EqualValues(t, 3, app.RestartCount)
	assert.False(t, app.Ready)
	assert.Equal(t, v1.PodRunning, s.Phase, "a crash-looping Always pod is Running")

	// Once it starts, the reason is forgotten.
	reasons.Update(pod.UID, kubecontainer.PodSyncResult{SyncResults: []*kubecontainer.SyncResult{{Action: kubecontainer.StartContainer, Target: "app"}}})
	s = generateAPIPodStatus(pod, ps, v1.PodStatus{}, false, nil, reasons)
	assert.NotNil(t, s.ContainerStatuses[0].State.Terminated)
}

func TestGenerateAPIPodStatusCompletedJob(t *testing.T) {
	pod := phasePod(v1.RestartPolicyNever, nil, "job")
	ps := &kubecontainer.PodStatus{ID: pod.UID, SandboxStatuses: []*runtimeapi.PodSandboxStatus{{Id: "s1",
		State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Metadata: &runtimeapi.PodSandboxMetadata{}}},
		ContainerStatuses: []*kubecontainer.Status{rtStatus("job", "c1", kubecontainer.ContainerStateExited, 0, 0, podT0)}}
	old := v1.PodStatus{Phase: v1.PodRunning, PodIPs: []v1.PodIP{{IP: "10.88.0.2"}}}
	s := generateAPIPodStatus(pod, ps, old, true, nil, nil)
	assert.Equal(t, v1.PodSucceeded, s.Phase)
	assert.Empty(t, s.PodIPs, "no ready sandbox, no IP")
	assert.Equal(t, v1.ConditionFalse, condition(s, v1.PodReadyToStartContainers).Status)
	assert.Equal(t, status.PodCompleted, condition(s, v1.PodReady).Reason)
	assert.Equal(t, "Completed", s.ContainerStatuses[0].State.Terminated.Reason)

	// A terminal phase never goes back.
	s = generateAPIPodStatus(pod, &kubecontainer.PodStatus{ID: pod.UID}, v1.PodStatus{Phase: v1.PodSucceeded}, false, nil, nil)
	assert.Equal(t, v1.PodSucceeded, s.Phase)
}

func TestGenerateAPIPodStatusContainerVanished(t *testing.T) {
	pod := phasePod(v1.RestartPolicyAlways, nil, "app")
	old := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "app", RestartCount: 2,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	s := generateAPIPodStatus(pod, &kubecontainer.PodStatus{ID: pod.UID, SandboxStatuses: sandbox()}, old, false, nil, nil)
	app := s.ContainerStatuses[0]
	assert.Equal(t, ContainerCreating, app.State.Waiting.Reason)
	assert.Equal(t, ContainerReasonStatusUnknown, app.LastTerminationState.Terminated.Reason)
	assert.EqualValues(t, 3, app.RestartCount)
	assert.Equal(t, v1.PodRunning, s.Phase)
}

func envPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "a"}},
		Spec: v1.PodSpec{NodeName: "node-a", ServiceAccountName: "sa"},
	}
}

func envMap(envs []kubecontainer.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range envs {
		m[e.Name] = e.Value
	}
	return m
}

func TestMakeEnvironmentVariables(t *testing.T) {
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"LEVEL": "debug", "MODE": "fast"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default"}, Data: map[string][]byte{"password": []byte("s3cret")}},
	)
	c := &v1.Container{
		Name: "app",
		EnvFrom: []v1.EnvFromSource{
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
			{Prefix: "S_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}},
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "missing"}, Optional: ptr.To(true)}},
		},
		Env: []v1.EnvVar{
			{Name: "MODE", Value: "slow"}, // overrides envFrom
			{Name: "GREETING", Value: "hello $(POD_NAME) at $(LEVEL), $$(LEVEL) and $(UNDEFINED)"},
			{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "LATE", Value: "$(POD_NAME)"},
			{Name: "NS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "UID", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
			{Name: "APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "TEAM", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations['team']"}}},
			{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "SA", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
			{Name: "HOST_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
			{Name: "HOST_IPS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIPs"}}},
			{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "POD_IPS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIPs"}}},
			{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
			{Name: "LEVEL2", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "LEVEL"}}},
			{Name: "OPTIONAL_KEY", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "nope", Optional: ptr.To(true)}}},
			{Name: "OPTIONAL_SECRET", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: ptr.To(true)}}},
			{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "MEM_LIMIT_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
				Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPU_REQUEST_M", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
				Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
		},
		Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
			Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
		},
	}
	client.Tracker().Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: v1.NodeStatus{
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi")}}})
	envs, err := makeEnvironmentVariables(envPod(), c, "10.88.0.2",
		[]string{"10.88.0.2", "fd00::2"}, []string{"127.0.0.1", "::1"}, clientEnvSources(context.Background(), client, "node-a"), nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"LEVEL": "debug", "MODE": "slow", "S_password": "s3cret",
		"GREETING":      "hello $(POD_NAME) at debug, $(LEVEL) and $(UNDEFINED)", // POD_NAME is defined later
		"POD_NAME":      "web",
		"LATE":          "web",
		"NS":            "default",
		"UID":           "uid-1",
		"APP":           "web",
		"TEAM":          "a",
		"NODE":          "node-a",
		"SA":            "sa",
		"HOST_IP":       "127.0.0.1",
		"HOST_IPS":      "127.0.0.1,::1",
		"POD_IP":        "10.88.0.2",
		"POD_IPS":       "10.88.0.2,fd00::2",
		"PASSWORD":      "s3cret",
		"LEVEL2":        "debug",
		"CPU_LIMIT":     "2", // no limit: the node's allocatable
		"MEM_LIMIT_MI":  "128",
		"CPU_REQUEST_M": "250",
	}, envMap(envs))
	for i := 1; i < len(envs); i++ {
		assert.Less(t, envs[i-1].Name, envs[i].Name, "sorted by name")
	}
}

func TestMakeEnvironmentVariablesErrors(t *testing.T) {
	client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}})
	for _, tc := range []struct {
		name string
		env  v1.EnvVar
		from []v1.EnvFromSource
		want string
	}{
		{name: "missing configMap", env: v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k"}}},
			want: `configmaps "nope" not found`},
		{name: "missing key", env: v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "k"}}},
			want: "couldn't find key k in ConfigMap default/cfg"},
		{name: "missing secret", env: v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}}},
			want: `secrets "s" not found`},
		{name: "missing envFrom secret", from: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}},
			want: `secrets "s" not found`},
		{name: "bad field path", env: v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.hostname"}}},
			want: "unsupported fieldPath: spec.hostname"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", EnvFrom: tc.from}
			if tc.env.Name != "" {
				c.Env = []v1.EnvVar{tc.env}
			}
			_, err := makeEnvironmentVariables(envPod(), c, "", nil, nil, clientEnvSources(context.Background(), client, "node-a"), nil)
			assert.EqualError(t, err, tc.want)
		})
	}
}

func TestGeneratePodHostNameAndDomain(t *testing.T) {
	h := &PodRuntimeHelper{}
	pod := envPod()
	name, domain, err := h.GeneratePodHostNameAndDomain(pod)
	require.NoError(t, err)
	assert.Equal(t, "web", name)
	assert.Empty(t, domain)
	pod.Spec.Hostname, pod.Spec.Subdomain = "db-0", "db"
	name, domain, err = h.GeneratePodHostNameAndDomain(pod)
	require.NoError(t, err)
	assert.Equal(t, "db-0", name)
	assert.Equal(t, "db.default.svc.cluster.local", domain)
	pod.Spec.Hostname, pod.Spec.Subdomain = "", ""
	pod.Name = "a-very-long-pod-name-that-goes-on-and-on-past-the-dns-label-limit-x"
	name, _, err = h.GeneratePodHostNameAndDomain(pod)
	require.NoError(t, err)
	assert.Equal(t, "a-very-long-pod-name-that-goes-on-and-on-past-the-dns-label-lim", name)
	pod.Spec.Hostname = "Not_Valid"
	_, _, err = h.GeneratePodHostNameAndDomain(pod)
	assert.ErrorContains(t, err, `pod Hostname "Not_Valid" is not a valid DNS label`)

	// hostnameOverride wins over hostname and subdomain, dots and all, and
	// has no domain (the e2e specs "Override hostname of Pod").
	pod.Spec.Hostname, pod.Spec.Subdomain = "custom-host", "t"
	pod.Spec.HostnameOverride = ptr.To("override.example.host")
	name, domain, err = h.GeneratePodHostNameAndDomain(pod)
	require.NoError(t, err)
	assert.Equal(t, "override.example.host", name)
	assert.Empty(t, domain)
	pod.Spec.HostnameOverride = ptr.To("Not-RFC1123")
	_, _, err = h.GeneratePodHostNameAndDomain(pod)
	assert.ErrorContains(t, err, `pod HostnameOverride "Not-RFC1123" is not a valid DNS subdomain`)
}

func TestGenerateAPIPodStatusBeforeAnythingRuns(t *testing.T) {
	withInit := phasePod(v1.RestartPolicyAlways, []string{"init"}, "app")
	s := generateAPIPodStatus(withInit, nil, v1.PodStatus{}, false, nil, nil)
	assert.Equal(t, v1.PodPending, s.Phase)
	assert.Equal(t, PodInitializing, s.InitContainerStatuses[0].State.Waiting.Reason, "as upstream, init containers too")
	assert.Equal(t, PodInitializing, s.ContainerStatuses[0].State.Waiting.Reason)
	assert.Equal(t, v1.ConditionFalse, condition(s, v1.PodReadyToStartContainers).Status, "no sandbox yet")

	plain := phasePod(v1.RestartPolicyAlways, nil, "app")
	s = generateAPIPodStatus(plain, &kubecontainer.PodStatus{ID: plain.UID}, v1.PodStatus{}, false, nil, nil)
	assert.Equal(t, ContainerCreating, s.ContainerStatuses[0].State.Waiting.Reason)
	assert.False(t, *s.ContainerStatuses[0].Started)
	assert.Empty(t, s.PodIP)
}

// A limits.* resourceFieldRef the container sets no limit for is the
// Node's allocatable, read by the kubelet's own runtime helper (the e2e
// spec "Downward API should provide default limits.cpu/memory from node
// allocatable").
func TestRuntimeHelperDefaultsLimitsToTheNodesAllocatable(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("3"), v1.ResourceMemory: resource.MustParse("2Gi")}}}
	f := newPodFixture(t, node)
	pod := staticPod("web", "u1") // a static pod does not wait for the Services
	pod.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		{Name: "MEMORY_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory"}}},
	}
	opts, err := runtimeHelper{f.kl}.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "", nil, nil)
	require.NoError(t, err)
	env := envMap(opts.Envs)
	assert.Equal(t, "3", env["CPU_LIMIT"])
	assert.Equal(t, "2147483648", env["MEMORY_LIMIT"])

	// Another container's limit, named by containerName.
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "other", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}})
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "OTHER_CPU_M", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
		ContainerName: "other", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}}}
	opts, err = runtimeHelper{f.kl}.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "500", envMap(opts.Envs)["OTHER_CPU_M"])

	f = newPodFixture(t) // no Node
	pod.Spec.Containers[0].Env = pod.Spec.Containers[0].Env[:0]
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env,
		v1.EnvVar{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}})
	_, err = runtimeHelper{f.kl}.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "", nil, nil)
	assert.EqualError(t, err, "failed to find node object, expected a node")
}

// In a pod with pod-level limits, a limits.* resourceFieldRef the
// container sets no limit for is the pod's limit (upstream's
// defaultPodLimitsForDownwardAPI); one the pod does not limit at the pod
// level stays the Node's allocatable, and the container's own limit wins.
func TestRuntimeHelperDefaultsLimitsToPodLevelLimits(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("3"), v1.ResourceMemory: resource.MustParse("2Gi"), v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}}}
	f := newPodFixture(t, node)
	pod := staticPod("web", "u1")
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("200Mi")}}
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "own", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("50Mi")}}})
	ref := func(name, res string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: res, Divisor: resource.MustParse("1Mi")}}}
	}
	pod.Spec.Containers[0].Env = []v1.EnvVar{ref("MEMORY_LIMIT", "limits.memory"), ref("STORAGE_LIMIT", "limits.ephemeral-storage"),
		{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		{Name: "OWN_MEMORY_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "own", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}}}
	opts, err := runtimeHelper{f.kl}.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "", nil, nil)
	require.NoError(t, err)
	env := envMap(opts.Envs)
	assert.Equal(t, "200", env["MEMORY_LIMIT"], "the pod-level memory limit")
	assert.Equal(t, "3", env["CPU_LIMIT"], "no pod-level cpu limit: the Node's allocatable")
	assert.Equal(t, "10240", env["STORAGE_LIMIT"], "ephemeral-storage is no pod-level resource")
	assert.Equal(t, "50", env["OWN_MEMORY_LIMIT"], "a container's own limit")
}

type oneConfigMap struct {
	ConfigMapManager
	cm *v1.ConfigMap
}

func (m oneConfigMap) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	if ns == m.cm.Namespace && name == m.cm.Name {
		return m.cm, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
}

type oneSecret struct {
	SecretManager
	s *v1.Secret
}

func (m oneSecret) GetSecret(ns, name string) (*v1.Secret, error) {
	if ns == m.s.Namespace && name == m.s.Name {
		return m.s, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
}

// env and envFrom read the kubelet's watching ConfigMap and Secret
// managers (upstream's configMapManager, secretManager), not the API
// server: the e2e specs' ConfigMap and Secret keys (data-1, with envFrom's
// prefix), and a missing one with the manager's message.
func TestRuntimeHelperEnvReadsTheManagers(t *testing.T) {
	f := newPodFixture(t) // the API server has neither
	f.kl.volumes = &volumes{
		configMapManager: oneConfigMap{cm: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"},
			Data: map[string]string{"data-1": "value-1", "data-2": "value-2"}}},
		secretManager: oneSecret{s: &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sec"},
			Data: map[string][]byte{"data-1": []byte("value-1")}}},
	}
	p := runtimeHelper{f.kl}.helper()
	p.Volumes = nil // only the environment
	pod := staticPod("web", "u1")
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []v1.EnvFromSource{
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
		{Prefix: "p-", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
	}
	c.Env = []v1.EnvVar{
		{Name: "CONFIG_DATA_1", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "data-1"}}},
		{Name: "SECRET_DATA", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "data-1"}}},
	}
	opts, err := p.GenerateRunContainerOptions(context.Background(), pod, c, "", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"data-1": "value-1", "data-2": "value-2", "p-data-1": "value-1",
		"CONFIG_DATA_1": "value-1", "SECRET_DATA": "value-1"}, envMap(opts.Envs))

	c.Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Key: "k"}}}}
	_, err = p.GenerateRunContainerOptions(context.Background(), pod, c, "", nil, nil)
	assert.EqualError(t, err, `configmap "gone" not found`, "the manager's error, as upstream")
}

// syncPod hands the runtime the IPs of the status it computed: for a
// hostNetwork pod the node's, which the runtime does not report.
func TestStatusPodIPs(t *testing.T) {
	assert.Equal(t, []string{"192.0.2.1", "2001:db8::1"}, statusPodIPs(v1.PodStatus{PodIP: "192.0.2.1",
		PodIPs: []v1.PodIP{{IP: "192.0.2.1"}, {IP: "2001:db8::1"}}}))
	assert.Equal(t, []string{"192.0.2.1"}, statusPodIPs(v1.PodStatus{PodIP: "192.0.2.1"}))
	assert.Empty(t, statusPodIPs(v1.PodStatus{}))

	hostNet := envPod()
	hostNet.Spec.HostNetwork = true
	s := generateAPIPodStatus(hostNet, &kubecontainer.PodStatus{ID: hostNet.UID}, v1.PodStatus{}, false, []string{"192.0.2.7"}, nil)
	assert.Equal(t, []string{"192.0.2.7"}, statusPodIPs(s), "a hostNetwork pod's IPs are the node's")
}
