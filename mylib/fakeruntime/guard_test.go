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

// TestAPanicInAHandlerOnAPipelinesGoroutineFailsOnlyItsCommand: the
// interpreter runs `boom | cat` and `boom &` on goroutines of its own,
// where an unrecovered panic would end the process. Guarded, each panic
// is its command's exit 2 and one line on stderr, and the script goes on.
func TestAPanicInAHandlerOnAPipelinesGoroutineFailsOnlyItsCommand(t *testing.T) {
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
	runner, err := interp.New(interp.StdIO(nil, &stdout, &stderr), interp.CallHandler(call),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return exec }),
		interp.OpenHandler(open), interp.StatHandler(stat))
	require.NoError(t, err)
	file, err := syntax.NewParser().Parse(strings.NewReader(`boom | boom; echo "pipe $?"; boom & wait $!; echo "bg $?"; echo x > f; echo "open $?"; [ -e f ]; echo "stat $?"`), "")
	require.NoError(t, err)
	require.NoError(t, runner.Run(context.Background(), file))
	assert.Equal(t, "pipe 2\nbg 2\nopen 1\nstat 1\n", string(stdout.Bytes()))
	assert.Contains(t, string(stderr.Bytes()), "sh: boom: internal error: boom\n")
	assert.Contains(t, string(stderr.Bytes()), "internal error: open")

	file, err = syntax.NewParser().Parse(strings.NewReader(`callboom | true; echo never`), "")
	require.NoError(t, err)
	stdout = lockedBuffer{}
	err = runner.Run(context.Background(), file)
	assert.ErrorContains(t, err, "internal error: call", "a call handler's error halts the script, as a fatal shell error")
	assert.NotContains(t, string(stdout.Bytes()), "never")
}
