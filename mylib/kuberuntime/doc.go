// Package kuberuntime is the kubelet's side of the CRI: a gRPC client of a
// container runtime (containerd, CRI-O, or mylib/fakeruntime) that answers
// in the runtime-neutral types of mylib/container, and makes a pod run.
// Named after upstream's pkg/kubelet/kuberuntime, whose
// kubeGenericRuntimeManager does the same over k8s.io/cri-client:
//
//   - GetPods, GetPodStatus (runtime.go): what runs, grouped by pod UID;
//   - SyncPod, KillPod, computePodActions (kuberuntime_manager.go): the
//     sandbox first, init containers one at a time each to completion,
//     then the containers the restartPolicy says should run;
//   - kuberuntime_sandbox.go, kuberuntime_container.go,
//     kuberuntime_image.go: the sandbox and container configs (with the
//     container's mounts and its termination-message file), the
//     container's start and stop, its termination message after it exits
//     (the file, or the log's tail), images by imagePullPolicy with the
//     pod's imagePullSecrets as auth (mylib/images' image manager: pull
//     back-off, serial or parallel pulls, SetImagePullConfig);
//   - labels.go: the labels and annotations written on sandboxes and
//     containers and read back by GetPodStatus;
//   - kuberuntime_backoff.go: CrashLoopBackOff (NewCrashLoopBackOff,
//     GetStableKey) with upstream's v1.37 figures, 10 s doubling to 300 s;
//   - kuberuntime_lifecycle.go: postStart and preStop hooks (exec, sleep);
//   - kuberuntime_gc.go: garbage collection of dead containers and sandboxes.
//
// Wiring:
//
//	conn, err := kuberuntime.Connect(ctx, "unix:///run/containerd/containerd.sock", clock.RealClock{})
//	defer conn.Close()
//	pods, err := conn.GetPods(ctx, true) // sandboxes and containers grouped by pod UID
//	// The kubelet's own, built whole from the same CRI clients (kubelet.New does this):
//	m, err := kuberuntime.NewKubeGenericRuntimeManager(ctx, recorder, livenessManager, startupManager,
//		podLogsDir, runtimeHelper, "", clk, conn.RuntimeService(), conn.ImageService())
//	result := m.SyncPod(ctx, pod, podStatus, pullSecrets, backOff)
//
// Where it departs from upstream, and why (one line each):
//   - mounts are the kubelet's (volumes, /etc/hosts, image volumes,
//     which the runtime mounts) and the termination-message file, without
//     propagation or SELinux; the termination message is read without following a
//     symlink, and upstream's pod-wide cap on messages (12 KiB) is not
//     applied;
//   - in-place resize (SetAllocationManager, SetContainerManager) gives
//     each container one UpdateContainerResources for CPU and memory at
//     once, between the pod cgroup's growth and its shrinking (upstream:
//     memory, then CPU, each in that order), and no sidecar is resized;
//     a pod-level resize does not call CRI UpdatePodSandboxResources (a
//     notice to the runtime, which applies nothing itself);
//   - httpGet hooks dial only what the probes may (SetLifecycleHTTPDial);
//   - a sidecar (restartable init container) whose spec changed keeps
//     running (upstream replaces it), and the sidecars' turn to stop is
//     timed on the Manager's clock;
//   - the security context (security_context.go) has no extra groups
//     from volumes, no supplementalGroupsPolicy, no masked /proc paths
//     and no seccompDefault, and the image's user is asked for only when
//     runAsNonRoot or runAsGroup needs it (the runtime runs it otherwise);
//   - the container hash is FNV-32a of the spec's JSON, not upstream's
//     encoding, so it differs from a real kubelet's (only this kubelet reads it);
//   - pull secrets match a registry by exact host (upstream's keyring also
//     knows globs and path prefixes);
//   - init containers that completed are not pruned early (upstream's
//     pruneInitContainersBeforeStart); the garbage collector removes them.
package kuberuntime
