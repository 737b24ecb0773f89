package fakeruntime

import (
	"context"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// TestAPanicInAHandlerOnAPipelinesGoroutineEndsOnlyItsScript: the
// interpreter runs `boom | cat` and `boom &` on goroutines of its own,
// where an unrecovered panic would end the process. Guarded, a panic of a
// command or a call ends the script with an internal error; one of a file
// operation fails that operation.
func TestAPanicInAHandlerOnAPipelinesGoroutineEndsOnlyItsScript(t *testing.T) {
	var stdout, stderr lockedBuffer
	exec := guardExec(func(ctx context.Context, args []string) error {
		if args[0] == "boom" {
			panic("boom")
		}
		return nil
	})
	open := guardOpen(func(context.Context, string, int, os.FileMode) (io.ReadWriteCloser, error) { panic("open") })
	stat := guardStat(func(context.Context, string, bool) (fs.FileInfo, error) { panic("stat") })
	call := guardCall(func(_ context.Context, args []string) ([]string, error) {
		if args[0] == "callboom" {
			panic("call")
		}
		return args, nil
	})
	newRunner := func() *interp.Runner {
		r, err := interp.New(interp.StdIO(nil, &stdout, &stderr), interp.CallHandler(call),
			interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return exec }),
			interp.OpenHandler(open), interp.StatHandler(stat))
		require.NoError(t, err)
		return r
	}
	run := func(script string) error {
		stdout, stderr = lockedBuffer{}, lockedBuffer{}
		file, err := syntax.NewParser().Parse(strings.NewReader(script), "")
		require.NoError(t, err)
		return newRunner().Run(context.Background(), file)
	}
	for _, script := range []string{"true | boom; echo never", "callboom | true; echo never"} {
		err := run(script)
		assert.ErrorAs(t, err, new(internalError), script)
		assert.Equal(t, ExitCodeInternalError, exitCode(context.Background(), err, &stderr), script)
		assert.NotContains(t, string(stdout.Bytes()), "never", script)
	}
	assert.Equal(t, "sh: internal error: call\n", string(stderr.Bytes()))
	// A background job is a process of its own: its end is not the script's.
	require.NoError(t, run("boom & wait $!; echo after"))
	assert.Equal(t, "after\n", string(stdout.Bytes()))
	require.NoError(t, run(`echo x > f; echo "open $?"; [ -e f ]; echo "stat $?"`))
	assert.Equal(t, "open 1\nstat 1\n", string(stdout.Bytes()))
	assert.Contains(t, string(stderr.Bytes()), "internal error: open")
}
