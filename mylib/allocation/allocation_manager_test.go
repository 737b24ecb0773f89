package allocation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

func resources(cpu, memory string) v1.ResourceRequirements {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}
	return v1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
}

func testPod(uid types.UID, cpu, memory string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: uid},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{
				{Name: "setup", Resources: resources("50m", "16Mi")},
				{Name: "proxy", RestartPolicy: &always, Resources: resources("100m", "32Mi")},
			},
			Containers: []v1.Container{{Name: "app", Resources: resources(cpu, memory)}},
		},
	}
}

func newManager(t *testing.T, dir string) *Manager {
	t.Helper()
	m, err := NewManager(dir)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

func TestAllocationSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	pod := testPod("uid-1", "500m", "128Mi")
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
	if err := m.SetAllocatedResources(pod); err != nil {
		t.Fatal(err)
	}
	if err := m.SetActuatedResources(pod, &pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}

	restarted := newManager(t, dir)
	got, ok := restarted.GetContainerResourceAllocation("uid-1", "app")
	if !ok || !apiequality.Semantic.DeepEqual(got, resources("500m", "128Mi")) {
		t.Errorf("allocation of app after a restart = %v, %v; want 500m/128Mi", got, ok)
	}
	if got, ok := restarted.GetContainerResourceAllocation("uid-1", "proxy"); !ok || !apiequality.Semantic.DeepEqual(got, resources("100m", "32Mi")) {
		t.Errorf("allocation of the sidecar proxy after a restart = %v, %v; want 100m/32Mi", got, ok)
	}
	if _, ok := restarted.GetContainerResourceAllocation("uid-1", "setup"); ok {
		t.Error("an init container that is not a sidecar has an allocation; want none (it has ended)")
	}
	if got, ok := restarted.GetActuatedResources("uid-1", "app"); !ok || !apiequality.Semantic.DeepEqual(got, resources("500m", "128Mi")) {
		t.Errorf("actuated resources of app after a restart = %v, %v; want 500m/128Mi", got, ok)
	}
	// The pod-level allocation came back too.
	spec := testPod("uid-1", "500m", "128Mi")
	if got, _ := restarted.UpdatePodFromAllocation(spec); got.Spec.Resources == nil || got.Spec.Resources.Limits.Cpu().String() != "1" {
		t.Errorf("pod-level resources after a restart = %v; want a CPU limit of 1", got.Spec.Resources)
	}
}

func TestCheckpointFilesAreUpstreamsNamesWithMode0600(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	pod := testPod("uid-1", "500m", "128Mi")
	if err := m.SetAllocatedResources(pod); err != nil {
		t.Fatal(err)
	}
	if err := m.SetActuatedResources(pod, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"allocated_pods_state", "actuated_pods_state"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v; want 0600", name, fi.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d files; want the 2 checkpoints and no temporary file left", len(entries))
	}
}

func TestCorruptCheckpointIsAnError(t *testing.T) {
	valid := func(t *testing.T) (string, []byte) {
		dir := t.TempDir()
		if err := newManager(t, dir).SetAllocatedResources(testPod("uid-1", "500m", "128Mi")); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, allocatedPodsStateFile))
		if err != nil {
			t.Fatal(err)
		}
		return dir, b
	}
	for name, damage := range map[string]func([]byte) []byte{
		"not JSON": func(b []byte) []byte { return b[:len(b)/2] },
		"empty":    func([]byte) []byte { return nil },
		"data edited, checksum kept": func(b []byte) []byte {
			return []byte(strings.Replace(string(b), "128Mi", "999Mi", 1))
		},
		"checksum edited": func(b []byte) []byte {
			var cp checkpoint
			if err := json.Unmarshal(b, &cp); err != nil {
				panic(err)
			}
			cp.Checksum++
			out, _ := json.Marshal(cp)
			return out
		},
		"data not JSON, checksum matching": func([]byte) []byte {
			out, _ := json.Marshal(checkpoint{Data: "{", Checksum: checksum("{")})
			return out
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, b := valid(t)
			path := filepath.Join(dir, allocatedPodsStateFile)
			if err := os.WriteFile(path, damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := NewManager(dir)
			if err == nil {
				t.Fatalf("NewManager on a corrupt checkpoint = %v, nil error; want an error", m)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file %s", err, path)
			}
		})
	}
}

func TestRemoveOrphanedPodsKeepsOnlyTheRemainingPods(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	for _, uid := range []types.UID{"kept", "orphan"} {
		pod := testPod(uid, "500m", "128Mi")
		if err := m.SetAllocatedResources(pod); err != nil {
			t.Fatal(err)
		}
		if err := m.SetActuatedResources(pod, nil); err != nil {
			t.Fatal(err)
		}
	}

	m.RemoveOrphanedPods(sets.New[types.UID]("kept"))

	if _, ok := m.GetContainerResourceAllocation("orphan", "app"); ok {
		t.Error("the orphan's allocation is still there")
	}
	if _, ok := m.GetActuatedResources("orphan", "app"); ok {
		t.Error("the orphan's actuated resources are still there")
	}
	if _, ok := m.GetContainerResourceAllocation("kept", "app"); !ok {
		t.Error("the remaining pod's allocation is gone")
	}
	// The next write leaves the orphan out of the file as well.
	if err := m.SetAllocatedResources(testPod("new", "1", "1Gi")); err != nil {
		t.Fatal(err)
	}
	restarted := newManager(t, dir)
	if _, ok := restarted.GetContainerResourceAllocation("orphan", "app"); ok {
		t.Error("the orphan's allocation came back after a write and a restart")
	}
	if _, ok := restarted.GetContainerResourceAllocation("kept", "app"); !ok {
		t.Error("the remaining pod's allocation is gone after a restart")
	}
}

func TestUpdatePodFromAllocationReplacesResources(t *testing.T) {
	m := newManager(t, t.TempDir())
	if err := m.SetAllocatedResources(testPod("uid-1", "500m", "128Mi")); err != nil {
		t.Fatal(err)
	}

	// The spec asks for a resize the kubelet has not allocated yet.
	resized := testPod("uid-1", "2", "1Gi")
	resized.Spec.InitContainers[1].Resources = resources("200m", "64Mi")
	got, changed := m.UpdatePodFromAllocation(resized)
	if !changed {
		t.Fatal("UpdatePodFromAllocation of a resized pod reported no change")
	}
	if got == resized {
		t.Fatal("UpdatePodFromAllocation changed the caller's pod; want a copy")
	}
	if r := got.Spec.Containers[0].Resources; !apiequality.Semantic.DeepEqual(r, resources("500m", "128Mi")) {
		t.Errorf("app's resources = %v; want the allocated 500m/128Mi", r)
	}
	if r := got.Spec.InitContainers[1].Resources; !apiequality.Semantic.DeepEqual(r, resources("100m", "32Mi")) {
		t.Errorf("the sidecar's resources = %v; want the allocated 100m/32Mi", r)
	}
	if r := resized.Spec.Containers[0].Resources; !apiequality.Semantic.DeepEqual(r, resources("2", "1Gi")) {
		t.Errorf("the caller's pod was modified: app's resources = %v", r)
	}

	// Once allocated, the same spec is returned as it is.
	same := testPod("uid-1", "500m", "128Mi")
	if got, changed := m.UpdatePodFromAllocation(same); changed || got != same {
		t.Errorf("UpdatePodFromAllocation of a pod matching its allocation = (copy: %v, changed: %v); want the same pod, false", got != same, changed)
	}
	// "0.5" is 500m: quantities are compared by value, not by spelling.
	spelled := testPod("uid-1", "0.5", "128Mi")
	if _, changed := m.UpdatePodFromAllocation(spelled); changed {
		t.Error("a CPU of 0.5 against an allocation of 500m reported a change")
	}
	// A pod with no allocation is returned as it is.
	other := testPod("uid-2", "1", "1Gi")
	if got, changed := m.UpdatePodFromAllocation(other); changed || got != other {
		t.Error("UpdatePodFromAllocation of a pod with no allocation changed it")
	}
}

func TestSetActuatedResourcesOfOneContainerKeepsTheOthers(t *testing.T) {
	m := newManager(t, t.TempDir())
	pod := testPod("uid-1", "500m", "128Mi")
	if err := m.SetActuatedResources(pod, nil); err != nil {
		t.Fatal(err)
	}
	app := pod.Spec.Containers[0]
	app.Resources = resources("1", "256Mi")
	if err := m.SetActuatedResources(pod, &app); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.GetActuatedResources("uid-1", "app"); !apiequality.Semantic.DeepEqual(got, resources("1", "256Mi")) {
		t.Errorf("app's actuated resources = %v; want 1/256Mi", got)
	}
	if got, ok := m.GetActuatedResources("uid-1", "proxy"); !ok || !apiequality.Semantic.DeepEqual(got, resources("100m", "32Mi")) {
		t.Errorf("proxy's actuated resources = %v, %v; want them kept at 100m/32Mi", got, ok)
	}
	if _, ok := m.GetContainerResourceAllocation("uid-1", "app"); ok {
		t.Error("actuating set an allocation; want the two records apart")
	}
}

func TestFailedWriteLeavesTheAllocationAsItWas(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	if err := m.SetAllocatedResources(testPod("uid-1", "500m", "128Mi")); err != nil {
		t.Fatal(err)
	}
	// A directory in the checkpoint's place: the rename onto it fails,
	// for root too.
	path := filepath.Join(dir, allocatedPodsStateFile)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := m.SetAllocatedResources(testPod("uid-1", "2", "1Gi")); err == nil {
		t.Fatal("SetAllocatedResources into a read-only directory succeeded; want an error")
	}
	if got, _ := m.GetContainerResourceAllocation("uid-1", "app"); !apiequality.Semantic.DeepEqual(got, resources("500m", "128Mi")) {
		t.Errorf("after a failed write, app's allocation = %v; want it left at 500m/128Mi", got)
	}
}
