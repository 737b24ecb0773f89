package fakeruntime

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Tests of the interpreter layer's walls: what an untrusted script may do
// to the runtime's process (crash it, exhaust its stack, goroutines or
// memory) and what it may learn of the host.

func TestNestedShThatExitsZeroDoesNotCrash(t *testing.T) {
	r, _ := fixture(t)
	st, _ := runToEnd(t, r, "echo hi; sh -c true")
	assert.Equal(t, int32(0), st.ExitCode)
	assert.Equal(t, ReasonCompleted, st.Reason)

	sb := runSandbox(t, r, "other", "uid-other", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	resp := execIn(t, r, c, "sh", "-c", "echo hi; sh -c true")
	assert.Equal(t, int32(0), resp.ExitCode, string(resp.Stderr))
	assert.Equal(t, "hi\n", string(resp.Stdout))
	resp = execIn(t, r, c, "sh", "-c", "sh -c 'exit 3'; echo $?; sh -c 'sh -c true'")
	assert.Equal(t, int32(0), resp.ExitCode, string(resp.Stderr))
	assert.Equal(t, "3\n", string(resp.Stdout))
}

func TestPanicEndsOnlyItsContainer(t *testing.T) {
	testHookExec = func(name string) {
		if name == "boom" {
			panic("boom: a bug in a utility\nwith a second line")
		}
	}
	t.Cleanup(func() { testHookExec = nil })
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	bystander := createContainer(t, r, sb, "bystander", "sleep", "3600")
	startContainer(t, r, bystander)

	st, _ := runToEnd(t, r, "echo before; boom; echo never")
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(2), st.ExitCode)
	assert.Equal(t, ReasonError, st.Reason)

	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, bystander).State)
	resp := execIn(t, r, bystander, "sh", "-c", "echo before; boom; echo never")
	assert.Equal(t, int32(2), resp.ExitCode)
	assert.Equal(t, "before\n", string(resp.Stdout))
	assert.Equal(t, "sh: internal error: boom: a bug in a utility\n", string(resp.Stderr), "one line, no trace")
	resp = execIn(t, r, bystander, "sh", "-c", "echo still here")
	assert.Equal(t, "still here\n", string(resp.Stdout))

	// The streaming exec's interactive shell too.
	var out, errOut lockedBuffer
	code, err := r.execStreams(context.Background(), bystander, []string{"sh"}, strings.NewReader("echo a\nboom\necho b\n"), &out, &errOut, false)
	require.NoError(t, err)
	assert.Equal(t, 2, code)
	assert.Equal(t, "a\n", string(out.Bytes()))
	assert.Equal(t, "sh: internal error: boom: a bug in a utility\n", string(errOut.Bytes()))
}
