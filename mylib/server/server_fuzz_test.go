package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubepod "mykubelet/mylib/pod"
)

// stubRuntime answers the server's CRI calls without a runtime: the
// container's log is testdata/partial.log and it has exited (so a follow
// ends); exec, attach and port-forward fail.
type stubRuntime struct {
	runtimeapi.RuntimeServiceClient
}

func (stubRuntime) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest, ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{LogPath: "testdata/partial.log",
		State: runtimeapi.ContainerState_CONTAINER_EXITED}}, nil
}
func (stubRuntime) Exec(context.Context, *runtimeapi.ExecRequest, ...grpc.CallOption) (*runtimeapi.ExecResponse, error) {
	return nil, errors.New("no exec here")
}
func (stubRuntime) Attach(context.Context, *runtimeapi.AttachRequest, ...grpc.CallOption) (*runtimeapi.AttachResponse, error) {
	return nil, errors.New("no attach here")
}
func (stubRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: "sb"}}}, nil
}
func (stubRuntime) PortForward(context.Context, *runtimeapi.PortForwardRequest, ...grpc.CallOption) (*runtimeapi.PortForwardResponse, error) {
	return nil, errors.New("no port-forward here")
}

type allowIf bool

func (a allowIf) Authorize(context.Context, Attributes) (bool, string, error) {
	return bool(a), "", nil
}

// FuzzServerRequests sends arbitrary methods, paths and queries to the
// kubelet API (auth included) with a pod default/p whose container c
// runs: no request may panic, nor be answered 5xx but for the stub
// runtime's own failures and exec/attach of a container that does not run
// (both 500s, as upstream's streaming.WriteError answers them).
func FuzzServerRequests(f *testing.F) {
	for _, seed := range []string{
		"/healthz", "/pods", "/pods/", "/containerLogs/default/p/c", "/containerLogs/default/p/c?tailLines=2&timestamps=true",
		"/containerLogs/default/p/c?follow=true&limitBytes=3", "/containerLogs/default/p/c?previous=true", "/containerLogs/default/p/x",
		"/containerLogs/default/p/c?sinceSeconds=9223372036854775807", "/containerLogs/default/p/c?sinceTime=2026-11-22T10:00:02Z&tail=all",
		"/exec/default/p/c?command=ls&output=1", "/exec/default/p/uid-p/c?command=sh&input=1&tty=1", "/attach/default/p/c?output=1",
		"/portForward/default/p", "/portForward/default/p/uid-p?port=80", "/stats/summary", "//containerLogs/../p", "/%2e%2e/",
	} {
		f.Add("GET", seed, true)
	}
	f.Add("POST", "/exec/default/p/c?command=true&error=1", false)
	pods := kubepod.NewBasicPodManager()
	pods.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
		Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "c", ContainerID: "containerd://abc",
			State:                v1.ContainerState{Running: &v1.ContainerStateRunning{}},
			LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://old"}}}}}})
	f.Fuzz(func(t *testing.T, method, target string, allow bool) {
		if !strings.HasPrefix(target, "/") {
			return
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return // net/http answers 400 before any handler
		}
		s, err := NewServer(Config{NodeName: "n1", Pods: pods, Runtime: stubRuntime{}, Authenticator: allowAll{}, Authorizer: allowIf(allow)})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "http://n1:10250/", nil)
		r.Method, r.URL, r.RequestURI = method, u, target
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r) // a panic fails the fuzz
		if body := w.Body.String(); w.Code >= 500 && !strings.Contains(body, " here") && !strings.HasPrefix(body, "container not found") {
			t.Errorf("%s %s: %d %s", method, target, w.Code, w.Body.String())
		}
	})
}
