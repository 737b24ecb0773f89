package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"

	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/prober"
	"mykubelet/mylib/server"
)

// MockRuntime says how to serve the mock runtime (mylib/fakeruntime).
type MockRuntime struct {
	// Config is the mock's: its clock, pod network, pull latency, pids limit.
	fakeruntime.Config
	// Seed starts it with the sample pods (fakeruntime.SeedPods).
	Seed bool
	// ControlPath is its control API's unix socket (mode 0600: only this
	// user may use it); "" means none.
	ControlPath string
}

// ServeMockRuntime serves the mock runtime on endpoint (unix://path), as
// containerd serves the CRI beside a real kubelet, and its control API on
// m.ControlPath. Both stop when ctx ends, the mock's containers with it;
// wg waits for them.
func ServeMockRuntime(ctx context.Context, wg *sync.WaitGroup, endpoint string, m MockRuntime) (*fakeruntime.Runtime, error) {
	mock, err := fakeruntime.NewRuntime(m.Config)
	if err != nil {
		return nil, err
	}
	if m.Seed {
		if err := mock.Seed(ctx); err != nil {
			mock.Close()
			return nil, err
		}
	}
	if err := fakeruntime.ServeEndpoint(ctx, wg, mock, endpoint); err != nil {
		mock.Close()
		return nil, err
	}
	if m.ControlPath == "" {
		return mock, nil
	}
	cl, err := fakeruntime.ListenControl(m.ControlPath)
	if err != nil {
		return nil, fmt.Errorf("control API: %w", err)
	}
	server.ServeHTTP(ctx, wg, cl, fakeruntime.NewControlHandler(mock))
	return mock, nil
}

// PreInitRuntimeService is upstream's PreInitRuntimeService: the
// connection to the container runtime (kuberuntime.Connect, which asks
// its Version), after serving the mock runtime when s.FakeRuntime, set as
// deps.RemoteRuntimeService and RemoteImageService, with deps.ProbeDial: the probes may reach
// loopback and the pod network, when there is one. It prints the pod
// network and the control API it serves. Close the Manager when done.
func PreInitRuntimeService(ctx context.Context, wg *sync.WaitGroup, s *KubeletServer, deps *kubelet.Dependencies) (*kuberuntime.Manager, error) {
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	endpoint := s.KubeletConfiguration.ContainerRuntimeEndpoint
	reach, why := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ""
	var mockNet *fakeruntime.Runtime // the mock's pod network, whose range the node's podCIDR replaces later
	switch {
	case s.FakeRuntime:
		// The mock machine's memory bounds a container without a memory
		// limit, as a real node's would (0: the mock's default).
		m := MockRuntime{Config: fakeruntime.Config{Clock: deps.Clock, PodNetwork: s.PodNetwork, MemoryCapacity: s.MockMachine.MemoryCapacity},
			ControlPath: s.ControlAddress}
		if s.PodNetwork {
			m.PodCIDR = s.PodCIDR
		}
		if s.Volumes { // the mock maps mounts from the pods' directories and the hostPath root only
			m.MountRoots = mountRoots(s.RootDirectory, s.HostPathRoot)
		}
		// podPidsLimit bounds each container's processes; the kubelet's
		// default, -1 (no bound of its own), leaves the mock's.
		if l := s.KubeletConfiguration.PodPidsLimit; l != nil && *l > 0 {
			m.PodPidsLimit = *l
		}
		mock, err := ServeMockRuntime(ctx, wg, endpoint, m)
		if err != nil {
			return nil, err
		}
		if err := mock.PodNetworkError(); s.PodNetwork && errors.Is(err, fakeruntime.ErrPodNetworkWaits) {
			// Its range comes with the node's podCIDR (UpdateRuntimeConfig);
			// until then no pod starts.
			mockNet = mock
			fmt.Printf("pod network: %v; pods fail to start (FailedCreatePodSandBox) until the kubelet hands it over\n", err)
		} else if s.PodNetwork && err != nil {
			why = "the mock runtime has no pod network"
			fmt.Printf("pod network: none (%v); httpGet, tcpSocket and grpc probes will fail\n", err)
		} else if s.PodNetwork {
			ns, veth := mock.PodNetworkName()
			reach = append(reach, mock.PodCIDR())
			mockNet = mock
			fmt.Printf("pod network: %s in network namespace %s, reached through %s\n", mock.PodCIDR(), ns, veth)
		}
		if m.ControlPath != "" {
			fmt.Printf("control API: unix://%s (curl it for help)\n", m.ControlPath)
		}
	case s.PodNetwork: // the runtime's own pod network
		p, err := netip.ParsePrefix(s.PodCIDR)
		if err != nil {
			return nil, fmt.Errorf("pod CIDR: %w", err)
		}
		reach = append(reach, p)
	}
	runtime, err := kuberuntime.Connect(ctx, endpoint, deps.Clock)
	if err != nil {
		return nil, err
	}
	deps.RemoteRuntimeService, deps.RemoteImageService = runtime.RuntimeService(), runtime.ImageService()
	deps.ProbeDial = prober.GuardedDialer(reach, why)
	if mockNet != nil { // probes reach the pod CIDR the runtime takes later too (UpdateRuntimeConfig)
		deps.ProbeDial = mockNet.ReachPodCIDRs(deps.ProbeDial)
	}
	return runtime, nil
}

// mountRoots are the host directories the kubelet's mounts come from:
// R/pods (the pods' volumes, /etc/hosts, termination-message files) and
// the hostPath root (hostPath volumes; "": R/host).
func mountRoots(rootDirectory, hostPathRoot string) []string {
	if abs, err := filepath.Abs(rootDirectory); err == nil {
		rootDirectory = abs
	}
	if hostPathRoot == "" {
		hostPathRoot = filepath.Join(rootDirectory, "host")
	} else if abs, err := filepath.Abs(hostPathRoot); err == nil {
		hostPathRoot = abs
	}
	return []string{filepath.Join(rootDirectory, "pods"), hostPathRoot}
}
