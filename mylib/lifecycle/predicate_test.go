package lifecycle

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func testNode(pods int, cpu, mem string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"disk": "ssd", "gen": "5"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
			v1.ResourceCPU:    resource.MustParse(cpu),
			v1.ResourceMemory: resource.MustParse(mem),
		}},
	}
}

func requests(cpu, mem string) v1.ResourceRequirements {
	l := v1.ResourceList{}
	if cpu != "" {
		l[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return v1.ResourceRequirements{Requests: l}
}

func podWith(name string, res ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{NodeName: "n1"}}
	for _, r := range res {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c", Resources: r})
	}
	return p
}

func withLabels(p *v1.Pod, labels map[string]string) *v1.Pod { p.Labels = labels; return p }

func withNodeLabels(n *v1.Node, labels map[string]string) *v1.Node { n.Labels = labels; return n }

func TestPredicateAdmitHandler(t *testing.T) {
	affinity := func(terms ...v1.NodeSelectorTerm) *v1.Affinity {
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	expr := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	withSpec := func(p *v1.Pod, f func(*v1.PodSpec)) *v1.Pod { f(&p.Spec); return p }
	tests := []struct {
		name        string
		pod         *v1.Pod
		others      []*v1.Pod
		node        *v1.Node
		wantReason  string
		wantMessage string
	}{
		{name: "fits", pod: podWith("a", requests("500m", "1Gi")), others: []*v1.Pod{podWith("b", requests("1", "1Gi"))}, node: testNode(3, "2", "4Gi")},
		{name: "no requests fit while there is room for a pod", pod: podWith("a"), others: []*v1.Pod{podWith("b")}, node: testNode(2, "0", "0")},
		{name: "maxPods full", pod: podWith("a"), others: []*v1.Pod{podWith("b"), podWith("c")}, node: testNode(2, "2", "4Gi"),
			wantReason: OutOfPods, wantMessage: "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"},
		{name: "cpu beyond allocatable minus admitted pods", pod: podWith("a", requests("1500m", "")), others: []*v1.Pod{podWith("b", requests("1", ""))}, node: testNode(10, "2", "4Gi"),
			wantReason: OutOfCPU, wantMessage: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"},
		{name: "memory in bytes", pod: podWith("a", requests("", "3Gi")), others: []*v1.Pod{podWith("b", requests("", "2Gi"))}, node: testNode(10, "2", "4Gi"),
			wantReason: OutOfMemory, wantMessage: "Node didn't have enough resource: memory, requested: 3221225472, used: 2147483648, capacity: 4294967296"},
		{name: "ephemeral storage beyond allocatable", pod: podWith("a", v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}}), node: testNode(10, "2", "4Gi"),
			wantReason: OutOfEphemeralStorage, wantMessage: "Node didn't have enough resource: ephemeral-storage, requested: 1073741824, used: 0, capacity: 0"},
		{name: "pods are checked before cpu", pod: podWith("a", requests("3", "")), others: []*v1.Pod{podWith("b")}, node: testNode(1, "2", "4Gi"),
			wantReason: OutOfPods, wantMessage: "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"},
		{name: "resources before affinity", pod: withSpec(podWith("a", requests("3", "")), func(s *v1.PodSpec) { s.NodeSelector = map[string]string{"disk": "hdd"} }),
			node: testNode(10, "2", "4Gi"), wantReason: OutOfCPU, wantMessage: "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"},
		{name: "node selector matches", pod: withSpec(podWith("a"), func(s *v1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} }), node: testNode(10, "2", "4Gi")},
		{name: "node selector mismatch", pod: withSpec(podWith("a"), func(s *v1.PodSpec) { s.NodeSelector = map[string]string{"disk": "hdd"} }), node: testNode(10, "2", "4Gi"),
			wantReason: "NodeAffinity", wantMessage: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "affinity In matches", pod: withSpec(podWith("a"), func(s *v1.PodSpec) { s.Affinity = affinity(expr("disk", v1.NodeSelectorOpIn, "nvme", "ssd")) }), node: testNode(10, "2", "4Gi")},
		{name: "affinity terms are ORed", pod: withSpec(podWith("a"), func(s *v1.PodSpec) {
			s.Affinity = affinity(expr("zone", v1.NodeSelectorOpExists), expr("gen", v1.NodeSelectorOpGt, "4"))
		}), node: testNode(10, "2", "4Gi")},
		{name: "affinity NotIn mismatch", pod: withSpec(podWith("a"), func(s *v1.PodSpec) { s.Affinity = affinity(expr("disk", v1.NodeSelectorOpNotIn, "ssd")) }), node: testNode(10, "2", "4Gi"),
			wantReason: "NodeAffinity", wantMessage: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "affinity Lt mismatch", pod: withSpec(podWith("a"), func(s *v1.PodSpec) { s.Affinity = affinity(expr("gen", v1.NodeSelectorOpLt, "5")) }), node: testNode(10, "2", "4Gi"),
			wantReason: "NodeAffinity", wantMessage: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "affinity DoesNotExist matches", pod: withSpec(podWith("a"), func(s *v1.PodSpec) { s.Affinity = affinity(expr("gpu", v1.NodeSelectorOpDoesNotExist)) }), node: testNode(10, "2", "4Gi")},
		{name: "an empty term matches nothing", pod: withSpec(podWith("a"), func(s *v1.PodSpec) { s.Affinity = affinity(v1.NodeSelectorTerm{}) }), node: testNode(10, "2", "4Gi"),
			wantReason: "NodeAffinity", wantMessage: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "matchFields on the node's name", pod: withSpec(podWith("a"), func(s *v1.PodSpec) {
			s.Affinity = affinity(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}})
		}), node: testNode(10, "2", "4Gi")},
		{name: "bound to another node", pod: withSpec(podWith("a"), func(s *v1.PodSpec) { s.NodeName = "n2" }), node: testNode(10, "2", "4Gi"),
			wantReason: "NodeName", wantMessage: "Predicate NodeName failed: node(s) didn't match the requested node name"},
		// The OS: spec.os.name and the pod's own kubernetes.io/os label
		// against the OS the kubelet runs on (linux), before the resources.
		{name: "spec.os windows", pod: withSpec(podWith("a", requests("3", "")), func(s *v1.PodSpec) { s.OS = &v1.PodOS{Name: v1.Windows} }), node: testNode(10, "2", "4Gi"),
			wantReason: "PodOSNotSupported", wantMessage: "Failed to admit pod as the OS field doesn't match node OS"},
		{name: "spec.os linux", pod: withSpec(podWith("a"), func(s *v1.PodSpec) { s.OS = &v1.PodOS{Name: v1.Linux} }), node: testNode(10, "2", "4Gi")},
		{name: "os label windows", pod: withLabels(podWith("a"), map[string]string{v1.LabelOSStable: "windows"}), node: testNode(10, "2", "4Gi"),
			wantReason: "PodOSSelectorNodeLabelDoesNotMatch", wantMessage: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{name: "os label linux on a node labelled otherwise", pod: withLabels(podWith("a"), map[string]string{v1.LabelOSStable: "linux"}),
			node: withNodeLabels(testNode(10, "2", "4Gi"), map[string]string{v1.LabelOSStable: "windows"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewPredicateAdmitHandler(func(context.Context, bool) (*v1.Node, error) { return tt.node, nil })
			got := h.Admit(context.Background(), &PodAdmitAttributes{Pod: tt.pod, OtherPods: tt.others})
			assert.Equal(t, tt.wantReason == "", got.Admit, "admit")
			assert.Equal(t, tt.wantReason, got.Reason)
			assert.Equal(t, tt.wantMessage, got.Message)
		})
	}
}

func TestPodRequestsInitContainersMaxSidecarsSum(t *testing.T) {
	always := ptr.To(v1.ContainerRestartPolicyAlways)
	tests := []struct {
		name    string
		init    []v1.Container
		main    []v1.Container
		wantCPU string
	}{
		{name: "containers add up", main: []v1.Container{{Resources: requests("100m", "")}, {Resources: requests("200m", "")}}, wantCPU: "300m"},
		{name: "a larger init container wins over the sum", init: []v1.Container{{Resources: requests("1", "")}, {Resources: requests("500m", "")}},
			main: []v1.Container{{Resources: requests("100m", "")}, {Resources: requests("200m", "")}}, wantCPU: "1"},
		{name: "init containers are not summed", init: []v1.Container{{Resources: requests("200m", "")}, {Resources: requests("200m", "")}},
			main: []v1.Container{{Resources: requests("300m", "")}}, wantCPU: "300m"},
		{name: "a sidecar runs beside the containers", init: []v1.Container{{RestartPolicy: always, Resources: requests("100m", "")}},
			main: []v1.Container{{Resources: requests("300m", "")}}, wantCPU: "400m"},
		{name: "an init container after a sidecar runs beside it", init: []v1.Container{{RestartPolicy: always, Resources: requests("300m", "")}, {Resources: requests("1", "")}},
			main: []v1.Container{{Resources: requests("100m", "")}}, wantCPU: "1300m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodRequests(&v1.Pod{Spec: v1.PodSpec{InitContainers: tt.init, Containers: tt.main}})
			want := resource.MustParse(tt.wantCPU)
			assert.Equal(t, want.MilliValue(), got.Cpu().MilliValue())
		})
	}
	overhead := PodRequests(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Resources: requests("100m", "")}},
		Overhead: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m")}}})
	assert.Equal(t, int64(150), overhead.Cpu().MilliValue(), "overhead is added")
}

func TestAdmitLooksAtAFreshNodeBeforeRejectingOnAffinity(t *testing.T) {
	cached := testNode(10, "2", "4Gi")
	fresh := cached.DeepCopy()
	fresh.Labels["disk"] = "hdd"
	var asked []bool
	h := NewPredicateAdmitHandler(func(_ context.Context, useCache bool) (*v1.Node, error) {
		asked = append(asked, useCache)
		if useCache {
			return cached, nil
		}
		return fresh, nil
	})
	pod := podWith("a")
	pod.Spec.NodeSelector = map[string]string{"disk": "hdd"}
	got := h.Admit(context.Background(), &PodAdmitAttributes{Pod: pod})
	assert.True(t, got.Admit, "the label was added a moment ago")
	assert.Equal(t, []bool{true, false}, asked)
}

func TestAdmitWithoutTheNodeIsInvalidNodeInfo(t *testing.T) {
	h := NewPredicateAdmitHandler(func(context.Context, bool) (*v1.Node, error) { return nil, errors.New("no node") })
	got := h.Admit(context.Background(), &PodAdmitAttributes{Pod: podWith("a")})
	assert.Equal(t, PodAdmitResult{Reason: "InvalidNodeInfo", Message: "Kubelet cannot get node info."}, got)
}

type refuse string

func (r refuse) Admit(context.Context, *PodAdmitAttributes) PodAdmitResult {
	return PodAdmitResult{Reason: string(r), Message: "no"}
}

type accept struct{}

func (accept) Admit(context.Context, *PodAdmitAttributes) PodAdmitResult {
	return PodAdmitResult{Admit: true}
}

func TestHandlersFirstRefusalWins(t *testing.T) {
	ctx, attrs := context.Background(), &PodAdmitAttributes{Pod: podWith("a")}
	assert.Equal(t, "First", PodAdmitHandlers{accept{}, refuse("First"), refuse("Second")}.Admit(ctx, attrs).Reason)
	assert.True(t, PodAdmitHandlers{accept{}}.Admit(ctx, attrs).Admit)
}

func TestPodRequestsPodLevelRequestsReplaceTheContainers(t *testing.T) {
	pod := podWith("a", requests("100m", "50Mi"), requests("200m", ""))
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}
	pod.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}
	got := PodRequests(pod)
	assert.Equal(t, int64(300), got.Cpu().MilliValue(), "cpu is not set at the pod level: the containers' sum")
	assert.Equal(t, int64(1034<<20), got.Memory().Value(), "memory is the pod-level request, then the overhead")

	pod.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{"example.com/gpu": resource.MustParse("1")}}
	assert.False(t, IsPodLevelResourcesSet(pod), "only cpu, memory and hugepages are pod-level resources")
	got = PodRequests(pod)
	assert.Equal(t, int64(60<<20), got.Memory().Value())
}

func TestAdmitCountsPodLevelRequests(t *testing.T) {
	node := testNode(10, "2", "1Gi")
	h := NewPredicateAdmitHandler(func(context.Context, bool) (*v1.Node, error) { return node, nil })
	pod := podWith("a", v1.ResourceRequirements{}, v1.ResourceRequirements{})
	pod.Spec.Resources = &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("2Gi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("2Gi")},
	}
	got := h.Admit(context.Background(), &PodAdmitAttributes{Pod: pod})
	assert.False(t, got.Admit, "containers without requests, but the pod asks for 2Gi of a 1Gi node")
	assert.Equal(t, OutOfMemory, got.Reason)

	other := podWith("b")
	other.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}
	pod.Spec.Resources.Requests[v1.ResourceMemory] = resource.MustParse("100Mi")
	got = h.Admit(context.Background(), &PodAdmitAttributes{Pod: pod, OtherPods: []*v1.Pod{other}})
	assert.Equal(t, OutOfCPU, got.Reason, "the other pod's pod-level request is counted as used")
}

// TestContainerLimits: a container's own limits, and the pod's for a CPU
// or memory limit it does not set.
func TestContainerLimits(t *testing.T) {
	q := resource.MustParse
	pod := &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("200Mi")}}
	own := v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("500m")}}
	got := ContainerLimits(pod, own)
	assert.Equal(t, "500m", got.Cpu().String(), "its own CPU limit")
	assert.Equal(t, "200Mi", got.Memory().String(), "the pod's memory limit")
	assert.Empty(t, ContainerLimits(nil, v1.ResourceRequirements{}), "no pod-level resources: its own, none")
	inherits := ContainerLimits(pod, v1.ResourceRequirements{})
	assert.Equal(t, "1", inherits.Cpu().String(), "a container with no limits: the pod's")
	assert.NotContains(t, own.Limits, v1.ResourceMemory, "the container's own list is left as it was")
}
