// Package realnode_test is chapter 19's test: the capstone (chapter 13's
// program, built as is) on a real containerd, runc and CNI bridge and a real
// control plane (both set up by scripts/realnode.sh, through
// scripts/testkit/testcontainerd, with the node's bootstrap token and the
// approval of its serving CSR), each claim of the chapter's README an
// assertion. The chapter has no program of its own.
package realnode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/kuberuntime"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
	"mykubelet/scripts/testkit/testcontainerd"
)

const (
	node    = "real-node"
	busybox = "docker.io/library/busybox:1.35.0"
	// The test's own CNI network: neither the README walk's (10.22.0.0/16
	// on mykubelet0, and 10.26.0.0/16 on mkconf0 for its conformance
	// step) nor testcontainerd's own tests' (10.24.0.0/24, 10.25.0.0/24),
	// so that all of them can run at once.
	subnet = "10.27.0.0/24"
	bridge = "mykubelet-c19"
	v1Root = "/sys/fs/cgroup"
)

func readFile(t *testing.T, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(parts...))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// TestRealNode: the capstone joins as a containerd node; a Guaranteed web
// server with a readiness probe, a BestEffort pod sharing its process
// namespace, and a container over its memory limit; real processes in the
// pods' cgroups with their limits; exec and logs; OOMKilled by the kernel;
// /stats/summary from the cgroups; a restart that keeps the containers;
// the pod cgroups gone with the pods.
func TestRealNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containerd and a control plane")
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root (mounts, namespaces, cgroups): run the test as root")
	}
	if fi, err := os.Stat(filepath.Join(v1Root, "memory", "cgroup.procs")); err != nil || fi.IsDir() {
		t.Skip("reads cgroup v1 files (this machine's); the v2 layout is mylib/cm's tests'")
	}
	top := t
	// containerd, a cgroup root of the test's own in every hierarchy (the
	// kubelet's cgroupRoot: its kubepods goes below, apart from a learner's
	// /kubepods and other tests'), a control plane, the node's bootstrap
	// token and the approval of its serving CSR, as the README's `kubectl
	// certificate approve` does: all gone when the test ends.
	// containerd v2 (the lima VM's, vm.yaml's MYKUBELET_CONTAINERD=v2), which
	// also mounts image volumes; the README walk runs the chapter on
	// Debian's 1.6, this machine's default, and moves to v2 for its image
	// volume.
	rt := testcontainerd.Start(t, testcontainerd.Config{Flavor: "v2", Subnet: subnet, Bridge: bridge, Node: node})
	root := rt.CgroupRoot
	bin := testcluster.BuildChapter(t, "./chapters/13-mykubelet")
	kubeconfig := rt.AdminKubeconfig
	adminConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	admin, err := kubernetes.NewForConfig(adminConfig)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	conn, err := kuberuntime.Dial(rt.Endpoint)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	cri := runtimeapi.NewRuntimeServiceClient(conn)

	// The capstone's command line as scripts/conformance.sh starts it
	// (realnode::capstone_args), with realnode::capstone_config's config:
	// yaml/kubelet-config.yaml, the cgroup root and the cluster DNS (no
	// eviction thresholds of the conformance run's); on the containerd,
	// serving on a port of the harness's.
	args := rt.KubeletArgs
	require.NotEmpty(t, args, "scripts/realnode.sh gave no command line")
	kubelet := chaptertest.Start(t, bin, args...)
	kubelet.WaitForOutput(`node `+node+`: status written \(first report\): Ready=True, runtime containerd://`, 2*time.Minute)
	kubelet.WaitForOutput(`serving certificate: issued`, time.Minute)

	t.Run("the node joins as containerd://", func(t *testing.T) {
		assert.Regexp(t, `runtime: containerd \S+ at `+regexp.QuoteMeta(rt.Endpoint), kubelet.Stdout())
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://"), n.Status.NodeInfo.ContainerRuntimeVersion)
	})

	limits := v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []v1.Container{{
			Name: "httpd", Image: busybox, Command: []string{"httpd", "-f", "-v", "-p", "8080", "-h", "/tmp"},
			Resources:      v1.ResourceRequirements{Limits: limits},
			ReadinessProbe: &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}},
		}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), ShareProcessNamespace: ptr.To(true),
			Containers: []v1.Container{{Name: "app", Image: busybox, Command: []string{"sleep", "3600"}}, {Name: "sidecar", Image: busybox, Command: []string{"sleep", "3601"}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "memory-hog"}, Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{
			Name: "hog", Image: busybox, Command: []string{"tail", "/dev/zero"},
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}}}}}},
	}
	uids := map[string]string{}
	for _, p := range pods {
		p.Spec.NodeName = node
		created, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		uids[p.Name] = string(created.UID)
	}
	get := func(name string) *v1.Pod {
		p, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return p
	}
	for _, name := range []string{"web", "shared"} {
		require.Eventually(t, func() bool { return get(name).Status.Phase == v1.PodRunning }, time.Minute, 100*time.Millisecond, name)
	}
	_, gwNet, err := net.ParseCIDR(subnet)
	require.NoError(t, err)
	gw := slices.Clone(gwNet.IP.To4())
	gw[3]++
	sh := func(script string) string { t.Helper(); return chaptertest.Shell(t, kubeconfig, node, script) }

	t.Run("the pod runs with an address from the CNI range", func(t *testing.T) {
		ip := net.ParseIP(get("web").Status.PodIP)
		require.NotNil(t, ip)
		assert.True(t, rt.Subnet.Contains(ip), "pod IP %s outside %s", ip, rt.Subnet)
	})

	t.Run("an httpGet readiness probe over the CNI network: not Ready on 404, Ready on 200", func(t *testing.T) {
		notFound := fmt.Sprintf("[::ffff:%s]:", gw)
		require.Eventually(t, func() bool {
			logs := sh("kubectl logs web")
			return strings.Contains(logs, notFound) && strings.Contains(logs, "response:404")
		}, 30*time.Second, 200*time.Millisecond, "the kubelet's probes reach httpd from the bridge's address %s", gw)
		assert.False(t, podReady(get("web")), "Ready while its probe answers 404")
		assert.Equal(t, "", sh(`kubectl exec web -- sh -c 'echo "hello from $(hostname)" > /tmp/index.html'`))
		require.Eventually(t, func() bool { return podReady(get("web")) }, 30*time.Second, 100*time.Millisecond, "web Ready")
		assert.Contains(t, sh("kubectl logs web"), "response:200")
		assert.Equal(t, "hello from web", sh("kubectl exec web -- cat /tmp/index.html"))
	})

	containerPid := func(podName, container string) int {
		t.Helper()
		list, err := cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.name": podName, "io.kubernetes.container.name": container}}})
		require.NoError(t, err)
		require.Len(t, list.Containers, 1, "%s/%s running", podName, container)
		st, err := cri.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: list.Containers[0].Id, Verbose: true})
		require.NoError(t, err)
		var info struct {
			Pid int `json:"pid"`
		}
		require.NoError(t, json.Unmarshal([]byte(st.Info["info"]), &info))
		require.Positive(t, info.Pid)
		return info.Pid
	}

	t.Run("real processes on the host, in the pods' cgroups", func(t *testing.T) {
		pid := containerPid("web", "httpd")
		assert.Equal(t, "httpd -f -v -p 8080 -h /tmp", strings.ReplaceAll(strings.TrimRight(readFile(t, "/proc", strconv.Itoa(pid), "cmdline"), "\x00"), "\x00", " "))
		cg := readFile(t, "/proc", strconv.Itoa(pid), "cgroup")
		assert.Regexp(t, `(?m)^\d+:memory:`+regexp.QuoteMeta(root+"/kubepods/pod"+uids["web"]+"/")+`[0-9a-f]{64}$`, cg)
		pid = containerPid("shared", "app")
		assert.Regexp(t, `(?m)^\d+:cpu(,cpuacct)?:`+regexp.QuoteMeta(root+"/kubepods/besteffort/pod"+uids["shared"]+"/")+`[0-9a-f]{64}$`, readFile(t, "/proc", strconv.Itoa(pid), "cgroup"))
	})

	t.Run("PID 1: the container's own command, /pause with shareProcessNamespace", func(t *testing.T) {
		assert.Equal(t, "httpd", sh("kubectl exec web -- sh -c 'tr \"\\0\" \" \" </proc/1/cmdline' | cut -d' ' -f1"))
		assert.Equal(t, "/pause", sh("kubectl exec shared -c app -- sh -c 'tr \"\\0\" \" \" </proc/1/cmdline' | cut -d' ' -f1"))
		ps := sh("kubectl exec shared -c app -- ps")
		assert.Contains(t, ps, "sleep 3601", "the sidecar's process is seen from app")
	})

	t.Run("QoS and pod cgroups with the pods' limits", func(t *testing.T) {
		assert.Equal(t, v1.PodQOSGuaranteed, get("web").Status.QOSClass)
		assert.Equal(t, v1.PodQOSBestEffort, get("shared").Status.QOSClass)
		g := filepath.Join(root, "kubepods", "pod"+uids["web"])
		assert.Equal(t, "25000", readFile(t, v1Root, "cpu", g, "cpu.cfs_quota_us"))
		assert.Equal(t, "100000", readFile(t, v1Root, "cpu", g, "cpu.cfs_period_us"))
		assert.Equal(t, "256", readFile(t, v1Root, "cpu", g, "cpu.shares"))
		assert.Equal(t, "67108864", readFile(t, v1Root, "memory", g, "memory.limit_in_bytes"))
		be := filepath.Join(root, "kubepods", "besteffort", "pod"+uids["shared"])
		assert.Equal(t, "2", readFile(t, v1Root, "cpu", be, "cpu.shares"))
		assert.DirExists(t, filepath.Join(v1Root, "memory", root, "kubepods", "burstable"))
		sub, err := filepath.Glob(filepath.Join(v1Root, "cpu", be, "*", "cgroup.procs"))
		require.NoError(t, err)
		assert.Len(t, sub, 3, "the sandbox's and the two containers' cgroups below the pod's")
	})

	t.Run("each container's oom_score_adj: its QoS class's, against the node's memory", func(t *testing.T) {
		oomScoreAdj := func(pid string) int {
			t.Helper()
			v, err := strconv.Atoi(readFile(t, "/proc", pid, "oom_score_adj"))
			require.NoError(t, err)
			return v
		}
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		capacity := n.Status.Capacity.Memory().Value()
		request := resource.MustParse("64Mi")
		_, err = admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "burstable"}, Spec: v1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []v1.Container{{Name: "app", Image: busybox, Command: []string{"sleep", "3600"},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: request}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return get("burstable").Status.Phase == v1.PodRunning }, time.Minute, 100*time.Millisecond)

		assert.Equal(t, int(1000-1000*request.Value()/capacity), oomScoreAdj(strconv.Itoa(containerPid("burstable", "app"))),
			"Burstable: 1000 less its request's thousandths of the node's %d bytes", capacity)
		assert.Equal(t, 1000, oomScoreAdj(strconv.Itoa(containerPid("shared", "app"))), "BestEffort: killed first")
		// Guaranteed: -997, killed last. Where root may not lower a
		// process's score (this machine), containerd's
		// restrict_oom_score_adj keeps it at containerd's own, which it has
		// from this test.
		assert.Equal(t, max(-997, oomScoreAdj("self")), oomScoreAdj(strconv.Itoa(containerPid("web", "httpd"))), "Guaranteed")

		require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, "burstable", metav1.DeleteOptions{}))
		require.Eventually(t, func() bool {
			_, err := admin.CoreV1().Pods("default").Get(ctx, "burstable", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, time.Minute, 200*time.Millisecond, "burstable deleted, before the kubelet restart below")
	})

	t.Run("a pod-level resize: the pod's cgroup and its container's, in place; status.resources read back", func(t *testing.T) {
		podLevel := v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("128Mi")}
		created, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-level"}, Spec: v1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Resources:  &v1.ResourceRequirements{Requests: podLevel, Limits: podLevel.DeepCopy()},
			Containers: []v1.Container{{Name: "app", Image: busybox, Command: []string{"sleep", "3600"}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		var p *v1.Pod
		require.Eventually(t, func() bool {
			p = get("pod-level")
			return p.Status.Phase == v1.PodRunning && p.Status.Resources != nil && p.Status.Resources.Limits.Cpu().String() == "200m"
		}, time.Minute, 100*time.Millisecond, "running, status.resources read from its cgroup")
		assert.Equal(t, "128Mi", p.Status.Resources.Limits.Memory().String())
		before := p.Status.ContainerStatuses[0]
		podCgroup := filepath.Join(root, "kubepods", "pod"+string(created.UID))
		assert.Equal(t, "20000", readFile(t, v1Root, "cpu", podCgroup, "cpu.cfs_quota_us"))
		containerCgroup := func() string {
			t.Helper()
			m := regexp.MustCompile(`(?m)^\d+:cpu(?:,cpuacct)?:(\S+)$`).FindStringSubmatch(readFile(t, "/proc", strconv.Itoa(containerPid("pod-level", "app")), "cgroup"))
			require.NotNil(t, m)
			return m[1]
		}
		assert.Equal(t, "20000", readFile(t, v1Root, "cpu", containerCgroup(), "cpu.cfs_quota_us"), "the container takes the pod's CPU limit")

		p.Spec.Resources.Limits[v1.ResourceCPU] = resource.MustParse("300m")
		p.Spec.Resources.Requests[v1.ResourceCPU] = resource.MustParse("300m")
		_, err = admin.CoreV1().Pods("default").UpdateResize(ctx, "pod-level", p, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			p = get("pod-level")
			return p.Status.Resources != nil && p.Status.Resources.Limits.Cpu().String() == "300m"
		}, time.Minute, 100*time.Millisecond, "status.resources shows the pod cgroup's new CPU limit")
		assert.Equal(t, "30000", readFile(t, v1Root, "cpu", podCgroup, "cpu.cfs_quota_us"))
		assert.Equal(t, "307", readFile(t, v1Root, "cpu", podCgroup, "cpu.shares"))
		assert.Equal(t, "30000", readFile(t, v1Root, "cpu", containerCgroup(), "cpu.cfs_quota_us"), "the container's, in place")
		after := p.Status.ContainerStatuses[0]
		assert.Equal(t, before.ContainerID, after.ContainerID)
		assert.Equal(t, int32(0), after.RestartCount)

		// A pod memory limit below what the pod uses is not applied: the
		// resize stays in progress, with the error as its reason.
		p.Spec.Resources.Limits[v1.ResourceMemory] = resource.MustParse("10Ki")
		p.Spec.Resources.Requests[v1.ResourceMemory] = resource.MustParse("10Ki")
		_, err = admin.CoreV1().Pods("default").UpdateResize(ctx, "pod-level", p, metav1.UpdateOptions{})
		require.NoError(t, err)
		var inProgress v1.PodCondition
		require.Eventually(t, func() bool {
			for _, c := range get("pod-level").Status.Conditions {
				if c.Type == v1.PodResizeInProgress && c.Reason == v1.PodReasonError {
					inProgress = c
					return true
				}
			}
			return false
		}, time.Minute, 200*time.Millisecond, "PodResizeInProgress, reason Error")
		assert.Regexp(t, `^attempting to set pod memory limit \(10240\) below current usage \(\d+\)$`, inProgress.Message)
		assert.Equal(t, "134217728", readFile(t, v1Root, "memory", podCgroup, "memory.limit_in_bytes"), "the pod cgroup keeps its limit")

		// Gone, with its cgroup, before the kubelet restart below: a pod
		// deleted while no kubelet runs leaves its cgroup (the kubelet
		// removes only those it made: kubelet_cm.go).
		require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, "pod-level", metav1.DeleteOptions{}))
		require.Eventually(t, func() bool {
			_, err := admin.CoreV1().Pods("default").Get(ctx, "pod-level", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, time.Minute, 200*time.Millisecond, "pod-level deleted")
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(v1Root, "cpu", podCgroup))
			return os.IsNotExist(err)
		}, 30*time.Second, 200*time.Millisecond, "its cgroup removed")
	})

	t.Run("a container over its memory limit is OOMKilled by the kernel", func(t *testing.T) {
		var term *v1.ContainerStateTerminated
		require.Eventually(t, func() bool {
			p := get("memory-hog")
			if len(p.Status.ContainerStatuses) == 1 {
				term = p.Status.ContainerStatuses[0].State.Terminated
			}
			return p.Status.Phase == v1.PodFailed && term != nil
		}, time.Minute, 200*time.Millisecond)
		assert.Equal(t, "OOMKilled", term.Reason)
		assert.Equal(t, int32(137), term.ExitCode)
	})

	t.Run("/stats/summary: the pods' memory and CPU from their cgroups", func(t *testing.T) {
		cfg := rest.CopyConfig(adminConfig)
		cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", rt.KubeletPort)
		hc, err := rest.HTTPClientFor(cfg)
		require.NoError(t, err)
		type figures struct {
			Pods []struct {
				PodRef struct{ Name string } `json:"podRef"`
				CPU    struct {
					UsageCoreNanoSeconds uint64 `json:"usageCoreNanoSeconds"`
				} `json:"cpu"`
				Memory struct {
					WorkingSetBytes uint64 `json:"workingSetBytes"`
				} `json:"memory"`
			} `json:"pods"`
		}
		var last string
		require.Eventually(t, func() bool {
			resp, err := hc.Get(cfg.Host + "/stats/summary")
			if err != nil {
				last = err.Error()
				return false
			}
			defer resp.Body.Close()
			var s figures
			if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != 200 {
				last = fmt.Sprintf("%d %v", resp.StatusCode, err)
				return false
			}
			seen := map[string]bool{}
			for _, p := range s.Pods {
				seen[p.PodRef.Name] = p.CPU.UsageCoreNanoSeconds > 0 && p.Memory.WorkingSetBytes > 0
			}
			last = fmt.Sprint(seen)
			return seen["web"] && seen["shared"]
		}, 30*time.Second, 500*time.Millisecond, "web and shared with CPU and memory: %s", last)
		assert.NotContains(t, kubelet.Stderr(), "failed to list pod sandbox stats")
		assert.NotContains(t, kubelet.Stderr(), "cgroupPath is empty")
	})

	t.Run("a kubelet restart keeps the containers", func(t *testing.T) {
		all := func() []string {
			list, err := cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			require.NoError(t, err)
			var ids []string
			for _, c := range list.Containers {
				ids = append(ids, c.Id+" "+c.State.String())
			}
			slices.Sort(ids)
			return ids
		}
		before := all()
		webID := get("web").Status.ContainerStatuses[0].ContainerID
		assert.Equal(t, 0, kubelet.Stop())
		assert.Contains(t, kubelet.Stdout(), "stopped (the containers keep running in the runtime")
		assert.Equal(t, before, all(), "the containers run on without the kubelet")
		kubelet = chaptertest.Start(top, bin, args...) // it runs on after this subtest
		kubelet.WaitForOutput(`SyncLoop ADD source=api pods=\[[^\]]*default/web`, time.Minute)
		require.Eventually(t, func() bool {
			p := get("web")
			return podReady(p) && p.Status.ContainerStatuses[0].ContainerID == webID && p.Status.ContainerStatuses[0].RestartCount == 0
		}, 30*time.Second, 200*time.Millisecond)
		assert.Equal(t, before, all(), "no container stopped, none started")
	})

	t.Run("an image volume: the image's files, read-only; a missing one with pullPolicy Never: ErrImageNeverPull", func(t *testing.T) {
		imagePod := func(name, ref string, policy v1.PullPolicy) *v1.Pod {
			return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Volumes: []v1.Volume{{Name: "files", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}}},
				Containers: []v1.Container{{Name: "app", Image: busybox, Command: []string{"sleep", "3600"},
					VolumeMounts: []v1.VolumeMount{{Name: "files", MountPath: "/volume"}, {Name: "files", MountPath: "/etc-of-image", SubPath: "etc"}}}}}}
		}
		assert.Equal(t, "pod/image-volume created", sh("kubectl apply -f yaml/real-node/image-volume.yaml"), "the README's")
		for _, p := range []*v1.Pod{imagePod("image-subpath", busybox, v1.PullIfNotPresent), imagePod("image-never", "docker.io/library/not-here:1", v1.PullNever)} {
			_, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		for _, name := range []string{"image-volume", "image-subpath"} {
			require.Eventually(t, func() bool { return get(name).Status.Phase == v1.PodRunning }, time.Minute, 100*time.Millisecond, name)
		}
		assert.Equal(t, "/volume/bin/busybox", sh("kubectl exec image-volume -- ls /volume/bin/busybox"))
		// The README's lines.
		assert.Equal(t, "touch: /volume/x: Read-only file system\ncommand terminated with exit code 1",
			sh("kubectl exec image-volume -- touch /volume/x 2>&1; test $? = 1"))
		assert.Equal(t, sh("kubectl exec image-subpath -- cat /volume/etc/passwd"), sh("kubectl exec image-subpath -- cat /etc-of-image/passwd"), "subPath etc of the image")
		var reason string
		require.Eventually(t, func() bool {
			if cs := get("image-never").Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Waiting != nil {
				reason = cs[0].State.Waiting.Reason
			}
			return reason == "ErrImageNeverPull"
		}, time.Minute, 200*time.Millisecond, "waiting reason: %q", reason)
		// Gone before the next subtest counts the containers.
		for _, name := range []string{"image-volume", "image-subpath", "image-never"} {
			require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}))
			require.Eventually(t, func() bool {
				_, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, time.Minute, 200*time.Millisecond, name)
		}
	})

	t.Run("every pod cgroup goes with its pod", func(t *testing.T) {
		for _, p := range pods {
			require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{}))
		}
		for _, p := range pods {
			require.Eventually(t, func() bool {
				_, err := admin.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, time.Minute, 200*time.Millisecond, p.Name)
		}
		var left []string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			left = nil
			for _, pattern := range []string{"pod*", "*/pod*"} {
				found, err := filepath.Glob(filepath.Join(v1Root, "*", root, "kubepods", pattern))
				require.NoError(t, err)
				left = append(left, found...)
			}
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
		}
		require.Empty(t, left, "pod cgroups left 30 s after their pods")
		list, err := cri.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		require.NoError(t, err)
		for _, sb := range list.Items {
			assert.NotEqual(t, runtimeapi.PodSandboxState_SANDBOX_READY, sb.State, "sandbox %s still ready", sb.Metadata.Name)
		}
	})
}

// TestOwnNetwork: the test's containerd network overlaps neither the one
// scripts/containerd.sh gives a learner and the README walk, nor the one of
// the walk's conformance step (both can run at the same time: go test runs
// packages in parallel), nor testcontainerd's own test's; each has its own
// bridge.
func TestOwnNetwork(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(t), "scripts", "containerd.sh"))
	require.NoError(t, err)
	def := func(name string) string {
		m := regexp.MustCompile(`\$\{` + name + `:-([^}]+)\}`).FindSubmatch(script)
		require.NotNil(t, m, "scripts/containerd.sh has no default for %s", name)
		return string(m[1])
	}
	// conformance.sh's own, which the walk runs (chapter 19's conformance step).
	conf, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(t), "scripts", "conformance.sh"))
	require.NoError(t, err)
	// realnode::init NAME BRIDGE SUBNET CGROUP-ROOT (scripts/realnode.sh).
	m := regexp.MustCompile(`(?m)^realnode::init \S+ (\S+) (\S+)`).FindSubmatch(conf)
	require.NotNil(t, m, "scripts/conformance.sh sets no network of its own")
	nets := map[string][2]string{
		"scripts/containerd.sh":  {def("MYKUBELET_CNI_SUBNET"), def("MYKUBELET_CNI_BRIDGE")},
		"scripts/conformance.sh": {string(m[2]), string(m[1])},
		"testcontainerd":         {testcontainerd.DefaultSubnet, testcontainerd.DefaultBridge},
		"chapter 19's test":      {subnet, bridge},
	}
	for a, na := range nets {
		_, netA, err := net.ParseCIDR(na[0])
		require.NoError(t, err, a)
		for b, nb := range nets {
			if a >= b {
				continue
			}
			_, netB, err := net.ParseCIDR(nb[0])
			require.NoError(t, err, b)
			assert.False(t, netA.Contains(netB.IP) || netB.Contains(netA.IP), "%s's %s and %s's %s overlap", a, netA, b, netB)
			assert.NotEqual(t, na[1], nb[1], "%s and %s share a bridge", a, b)
		}
	}
}
