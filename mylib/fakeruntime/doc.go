// Package fakeruntime is an in-memory container runtime that speaks the real
// CRI (k8s.io/cri-api runtime/v1) over gRPC, so the chapters can talk to it
// exactly as the kubelet talks to containerd, on a machine with no
// containers at all.
//
// It keeps sandboxes, containers and images in memory and follows the CRI
// state machine: RunPodSandbox makes a READY sandbox, StopPodSandbox makes
// it NOTREADY and kills its containers, CreateContainer makes a CREATED
// container, StartContainer makes it RUNNING, StopContainer makes it EXITED
// with an exit code and reason. Calls it does not implement answer gRPC
// Unimplemented.
//
// For teaching, a container can be scripted (see Script) to exit after a
// while, to crash and restart in a loop, or to ignore SIGTERM until the stop
// timeout, and a small HTTP control API (NewControlHandler) kills, starts or
// removes containers and sandboxes by ID or by pod name. Time comes from an
// injected clock, so tests drive it.
//
// Wiring:
//
//	rt := fakeruntime.New(clock.RealClock{})
//	err := rt.Seed(ctx)                     // two sample pods (optional)
//	lis, err := fakeruntime.ListenUnix(statedir.Path(stateDir, statedir.RuntimeSocket))
//	go rt.Serve(ctx, lis)                   // CRI gRPC until ctx ends
//	http.ListenAndServe("127.0.0.1:10355", fakeruntime.NewControlHandler(rt))
package fakeruntime
