package kuberuntime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
)

// TestACallToAHungRuntimeEndsAtTheRequestTimeout: a runtime that accepts
// calls and never answers (stopped, stuck) makes the call fail with
// DeadlineExceeded from the client's own per-call timeout, not hang until
// the caller's context ends.
func TestACallToAHungRuntimeEndsAtTheRequestTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	rt := fakeruntime.New(clk)
	require.NoError(t, rt.Seed(context.Background()))
	f := fakeruntimetest.ServeFaulty(t, rt)

	m, err := kuberuntime.Connect(context.Background(), "unix://"+f.Socket(), clk,
		kuberuntime.WithRuntimeRequestTimeout(200*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })

	// The caller's context is generous: if it is what ends the call, the
	// client has no timeout of its own.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.Hang(true)
	_, err = m.GetPods(ctx, true)
	require.Error(t, err)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), err)
	assert.NoError(t, ctx.Err(), "the per-call timeout ended the call, not the caller's context")

	f.Hang(false)
	pods, err := m.GetPods(ctx, true)
	require.NoError(t, err)
	assert.Len(t, pods, len(fakeruntime.SeedPods))
}

func TestDialRefusesANonPositiveRequestTimeout(t *testing.T) {
	_, err := kuberuntime.Dial("/run/x.sock", kuberuntime.WithRuntimeRequestTimeout(0))
	assert.EqualError(t, err, "container runtime endpoint /run/x.sock: the runtime request timeout must be positive, not 0s")
}
