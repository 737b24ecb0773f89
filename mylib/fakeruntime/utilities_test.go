package fakeruntime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestWhatIsNotListedIsNotFound: the programs a docs example may need
// that are not Utilities (wget, curl, grep…) are not found, exit code
// 127, with the message the READMEs show.
func TestWhatIsNotListedIsNotFound(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sh", "-c", "sleep 1000")
	startContainer(t, r, c)
	waitSleeping(t, r)
	for _, prog := range []string{"wget", "curl", "grep", "sed", "awk", "head"} {
		resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{prog, "-qO-", "http://localhost/"}})
		require.NoError(t, err)
		assert.EqualValues(t, ExitCodeNotFound, resp.ExitCode, prog)
		assert.Equal(t, "sh: "+prog+": command not found (the fake runtime runs no programs: see fakeruntime.Utilities)\n", string(resp.Stderr), prog)
	}
}
