package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/logs"
	kubepod "mykubelet/mylib/pod"
)

// TestLogsAcrossRotationByTheContainerLogManager: a container writes 100
// numbered lines a second (on the runtime's fake clock) while the
// container log manager rotates its log at every pass (on its own fake
// clock). `kubectl logs -f`, started before the first line, gets every
// line once, in order, across the rotations; `kubectl logs` afterwards
// reads the live file only, as upstream.
func TestLogsAcrossRotationByTheContainerLogManager(t *testing.T) {
	ctx := context.Background()
	clk, mclk := clocktesting.NewFakeClock(time.Now()), clocktesting.NewFakeClock(time.Now())
	conn, err := grpc.NewClient("unix://"+fakeruntimetest.Serve(t, fakeruntime.New(clk)), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	cri := runtimeapi.NewRuntimeServiceClient(conn)
	_, err = runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}})
	require.NoError(t, err)
	logDir := t.TempDir()
	sb, err := cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-p"}, LogDirectory: logDir}})
	require.NoError(t, err)
	c, err := cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}, LogPath: "c/0.log",
		Command: []string{"sh", "-c", `i=0; while :; do j=0; while [ $j -lt 100 ]; do echo "line $i"; i=$((i+1)); j=$((j+1)); done; sleep 1; done`}}})
	require.NoError(t, err)
	path := filepath.Join(logDir, "c/0.log")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	pods := kubepod.NewBasicPodManager()
	pods.SetPods([]*v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
		Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
			{Name: "c", ContainerID: "mykubelet-fake://" + c.ContainerId, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}},
	}})
	s, err := NewServer(Config{NodeName: "n1", Pods: pods, Runtime: cri, Authenticator: allowAll{}, Authorizer: allowAll{}})
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	m, err := logs.NewContainerLogManager(logs.Config{Runtime: cri, MaxSize: "2Ki", MaxFiles: 3, MonitorInterval: 10 * time.Second, Clock: mclk})
	require.NoError(t, err)
	mctx, stopManager := context.WithCancel(ctx)
	managerDone := make(chan struct{})
	go func() { defer close(managerDone); m.Run(mctx) }()
	defer func() { stopManager(); <-managerDone }()

	// Follow from before the first line: the file exists, empty.
	require.NoError(t, os.WriteFile(path, nil, 0o640))
	_, err = cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
	require.NoError(t, err)
	resp, err := http.Get(srv.URL + "/containerLogs/default/p/c?follow=true")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	followed := &syncBuffer{}
	readDone := make(chan struct{})
	go func() { defer close(readDone); _, _ = io.Copy(followed, resp.Body) }()

	const batches = 8
	waitLine := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(followed.String(), fmt.Sprintf("line %d\n", n)) {
			require.True(t, time.Now().Before(deadline), "kubectl logs -f never got line %d", n)
			time.Sleep(time.Millisecond)
		}
	}
	for b := range batches {
		waitLine(100*b + 99) // the follower has the batch
		require.Eventually(t, mclk.HasWaiters, 5*time.Second, time.Millisecond)
		mclk.Step(10 * time.Second) // a pass: the log is over 2Ki, rotated
		require.Eventually(t, func() bool { fi, err := os.Stat(path); return err == nil && fi.Size() == 0 }, 5*time.Second, time.Millisecond,
			"rotated after batch %d", b)
		require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
		clk.Step(time.Second) // the next batch, written to the reopened file
	}
	waitLine(100*batches + 99)
	files, err := logs.GetAllLogs(path)
	require.NoError(t, err)
	assert.Len(t, files, 3, "containerLogMaxFiles 3")

	_, err = cri.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId, Timeout: 0})
	require.NoError(t, err)
	<-readDone // the container ended: the follow ends
	var want strings.Builder
	for i := range 100 * (batches + 1) {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	assert.Equal(t, want.String(), followed.String(), "every line once, in order, across %d rotations", batches)

	code, body := get(t, srv.URL+"/containerLogs/default/p/c")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.HasPrefix(body, fmt.Sprintf("line %d\n", 100*batches)), "the live file only, from the last rotation on: %.40q", body)
}
