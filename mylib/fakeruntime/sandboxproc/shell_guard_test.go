package sandboxproc

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
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
	var stdout, stderr guardBuffer
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
		stdout, stderr = guardBuffer{}, guardBuffer{}
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

// TestBoundedInputStopsTheParserBeforeItsStackGrows: inputs of at most
// 128 KiB that nest the parser a million frames deep (about 100 MB of
// stack: a few of them at once would take the sandbox process's 256 MB)
// are refused by the parser's depth, whatever the construct; a thousand
// levels of each still parse.
func TestBoundedInputStopsTheParserBeforeItsStackGrows(t *testing.T) {
	for _, c := range []struct {
		name, open, close string
		deep              bool // 128 KiB of it nest past maxParseFrames
	}{
		{"subshell", "(", ")", true},
		{"nested arithmetic", "$(( ", " ))", true},
		{"arithmetic parens", "(", ")", true},
		{"command substitution", "echo $(", ")", true},
		{"quoted command substitution", `echo "$(`, `)"`, true},
		{"block", "{ ", "; }", true},
		{"if", "if true; then ", "; fi", false},
		{"while", "while :; do ", "; done", false},
		{"parameter", "echo ${a:-", "}", true},
		{"function", "f() { ", "; }", true},
		{"here-document", "cat <<E\n$(", ")\nE\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			nest := func(n int) string {
				open, close := strings.Repeat(c.open, n), strings.Repeat(c.close, n)
				if c.name == "arithmetic parens" {
					return "echo $((" + open + "1" + close + "))"
				}
				return open + "true" + close
			}
			n := (MaxScriptBytes - 32) / (len(c.open) + len(c.close))
			_, err := ParseScript(nest(n))
			if c.deep {
				assert.ErrorIs(t, err, errNestedTooDeep, "%d levels", n)
			} else {
				assert.NoError(t, err, "%d levels: within the frames", n)
			}
			_, err = ParseScript(nest(1000))
			assert.NoError(t, err, "a thousand levels")
		})
	}
	_, err := ParseScript(strings.Repeat("(", 327680))
	assert.ErrorContains(t, err, "script too long (more than 131072 bytes): Argument list too long")
	// A long script that does not nest parses in full.
	f, err := ParseScript(strings.Repeat("true | true && echo $((1+2*3)) \"$(true)\"\n", MaxScriptBytes/45))
	require.NoError(t, err)
	assert.Len(t, f.Stmts, MaxScriptBytes/45)
	assert.ErrorIs(t, checkWords(strings.Repeat("$(", 60000)), errNestedTooDeep)
	assert.NoError(t, checkWords("'a' \"b\" $(c)"))
	assert.ErrorIs(t, checkArithmetic(strings.Repeat("(", 60000)), errNestedTooDeep)
	assert.NoError(t, checkArithmetic("(1+2)*3"))
}

// TestBuiltinCallFindsTheBuiltinBehindItsWrappers, as the interpreter
// dispatches: `builtin NAME` and `command [--] NAME` run the builtin NAME;
// `command -v`, a non-builtin NAME and `exec` do not.
func TestBuiltinCallFindsTheBuiltinBehindItsWrappers(t *testing.T) {
	for _, c := range []struct {
		args     string
		wrappers int
	}{
		{"eval x", 0},
		{"builtin eval x", 1},
		{"command eval x", 1},
		{"command -- eval x", 2},
		{"builtin command builtin . f", 3},
		{"command command -- builtin trap x EXIT", 4},
		{"builtin", 0},
		{"builtin nosuch eval", 0},
		{"command -v eval", 0},
		{"command -p eval", 0},
		{"command sh -c x", 0},
		{"exec eval x", 0},
		{"builtin exec eval x", 1},
		{"command --", 0},
	} {
		args := strings.Fields(c.args)
		wrappers, call := builtinCall(args)
		assert.Equal(t, args[:c.wrappers], wrappers, c.args)
		assert.Equal(t, args[c.wrappers:], call, c.args)
	}
}

// FuzzParseBounded feeds the runtime's parser entry points (a script, an
// alias value, an array subscript, a builtin's call behind its wrappers)
// with a piece repeated n times: each refuses or parses, and never takes
// the stack past its bound (a fatal overflow ends the fuzzing worker).
//
//	go test -run '^$' -fuzz FuzzParseBounded -fuzztime 2m ./mylib/fakeruntime/
func FuzzParseBounded(f *testing.F) {
	for _, piece := range []string{"(", "$(", "$((", "((", "{ ", "if :; then ", "${a:-", `"$(`, "`", "\\`", "! ", "a | ", "a && ", "- ", "1?1:", "1**", "cat <<E\n$(", "f() ", "case x in x) ", "[[ ( ", "$[", "<(", "@(", "a=(", "eval ", "builtin command "} {
		f.Add(piece, uint32(1000))
		f.Add(piece, uint32(100000))
	}
	f.Fuzz(func(t *testing.T, piece string, n uint32) {
		if len(piece) == 0 || int(n)*len(piece) > 2*MaxScriptBytes {
			return
		}
		src := strings.Repeat(piece, int(n))
		if _, err := ParseScript(src); err == nil && len(src) > MaxScriptBytes {
			t.Fatalf("a %d-byte script parsed", len(src))
		}
		_ = checkWords(src)
		_ = checkArithmetic(src)
		wrappers, call := builtinCall(strings.Fields(src))
		assert.Equal(t, len(strings.Fields(src)), len(wrappers)+len(call))
	})
}

// guardBuffer is a buffer the interpreter's goroutines write into at once.
type guardBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *guardBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *guardBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
