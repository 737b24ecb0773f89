// Package fakeruntime is a container runtime without a kernel: it speaks the
// real CRI (k8s.io/cri-api runtime/v1) over gRPC, so that the chapters talk
// to it exactly as the kubelet talks to containerd, on a machine with no
// containers at all. Its README.md says what it does, where it departs
// from containerd and why, the walls that keep a pod's untrusted YAML in
// its pod, and the test that proves each claim.
//
// It keeps sandboxes, containers and images in memory and follows the CRI
// state machine (RunPodSandbox, CreateContainer, StartContainer, …,
// GetContainerEvents for the Evented PLEG). A container's command runs as
// a POSIX shell script in an interpreter (package sandboxproc), never as a
// program of the host; as root on the real clock, in a sandbox process of
// its pod's own, walled in by the kernel. Its files are grouped by
// component, as containerd's are:
//
//	cri_*.go         the CRI services: the Runtime and its Config, sandboxes,
//	                 containers and their mounts, ExecSync, images, stats, logs,
//	                 the gRPC server and the sample pods (Seed)
//	streaming*.go    Exec, Attach and PortForward, on 127.0.0.1
//	control*.go      the teaching API (kill, stop, exec by pod name), on a unix
//	                 socket only its user can reach
//	sandboxproc*.go  the runtime's side of the sandbox processes: the pods, their
//	                 bind mounts, users, cgroups and binary
//	sandboxproc/     the interpreter, its utilities and limits, and the walled-in
//	                 child: no Kubernetes package (cmd/sandbox: its binary)
//	podnet/          the pod network: the namespace, the veth pair, the addresses
//	fakeruntimetest/ a runtime served for other packages' tests
//
// Wiring:
//
//	rt, err := fakeruntime.NewRuntime(fakeruntime.Config{StateDir: dir, // or New(clock.RealClock{})
//		MountRoots: []string{rootDir + "/pods", rootDir + "/host"}}) // the kubelet's: mounts come from there
//	err = rt.Seed(ctx)                      // two sample pods (optional)
//	lis, err := fakeruntime.ListenUnix(statedir.Path(stateDir, statedir.RuntimeSocket))
//	go rt.Serve(ctx, lis)                   // CRI gRPC until ctx ends, then Close
//	cl, err := fakeruntime.ListenControl(statedir.Path(stateDir, statedir.RuntimeControlSocket))
//	http.Serve(cl, fakeruntime.NewControlHandler(rt))
package fakeruntime
