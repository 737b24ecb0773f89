// Package app is upstream's cmd/kubelet/app in small: the start-up of a
// kubelet, written once, that every program of the course from the
// kubelet of SyncPod on calls with its own switches.
//
// The order is upstream's server.go:
//
//	Run (upstream: run)          the node's clients at the kubelet's rates (NewClients),
//	                             the client CA when there is a server (ClientCA), the
//	                             container runtime (PreInitRuntimeService: the mock runtime
//	                             served in this process when asked), then
//	RunKubelet                   the pod sources (kubelet.MakePodSourceConfig), the
//	                             event recorder (events.NewRecorder), then
//	  createAndInitKubelet       kubelet.NewMainKubelet(KubeletConfiguration, Dependencies)
//	                             (with the kubelet's series, metrics.New, when Stats, and
//	                             the stats provider when Stats or Eviction), then
//	  startKubelet               the kubelet API (server.Run) when EnableServer (with the
//	                             stats provider, /metrics… and /healthz's checks when
//	                             Stats), and Kubelet.Run until the context ends.
//
// The capstone is upstream's command too (command.go): NewKubeletCommand
// (the flags, the --config file, --help), whose Execute calls run, which
// gets the node's credentials first (the bootstrap kubeconfig, the client
// certificate's rotation, the serving certificate) and then calls the
// pieces after Run's first step: NewClients, ClientCA,
// PreInitRuntimeService, RunKubelet.
//
// Where it departs from upstream, and why: upstream's startKubelet starts
// Kubelet.Run in a goroutine and then its servers; RunKubelet starts the
// server first and blocks in Kubelet.Run, so that a server waiting for its
// certificate's approval says so before the pods run, and a program's
// output reads in order. Upstream's NewMainKubelet builds the stats
// provider inside the Kubelet; here createAndInitKubelet builds it just
// before (Dependencies.StatsProvider, over the Kubelet once made), and the
// eviction manager and the kubelet API read the same one. The in-process mock runtime, the pod network the
// probes may reach, the chapter annotation and the one-line reports
// (registered, status written, stopped) are the course's; upstream's
// kubelet talks to a runtime running beside it and logs with klog. The
// mock machine's flags (AddMockMachineFlags: --fake-memory-capacity…,
// --image-gc-period) are the course's too.
package app
