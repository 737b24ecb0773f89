package fakeruntime

import (
	"context"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// execStreams runs cmd in a running container with the session's streams
// and returns its exit code, as ExecSync does but streaming: `sh` alone
// with stdin is an interactive shell reading commands from stdin (with a
// prompt and a line editor when tty); anything else as ExecSync runs it.
// The container's end ends the command (137).
func (r *Runtime) execStreams(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) (int, error) {
	r.mu.Lock()
	c, err := r.findContainer(id)
	if err != nil {
		r.mu.Unlock()
		return 0, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING || c.fs == nil {
		r.mu.Unlock()
		return 0, status.Errorf(codes.FailedPrecondition, "Exec %s: container is %s, not running", short(c.id), c.state)
	}
	if err := c.findProgram(cmd[0]); err != nil {
		r.mu.Unlock()
		return 0, err
	}
	if tty {
		stdout = &sandboxproc.CrlfWriter{W: stdout}
		stderr = stdout
		if stdin != nil {
			stdin = sandboxproc.NewLineDiscipline(stdin, stdout)
		}
	}
	p := sandboxproc.NewProc(scriptClock{r.clock}, c.fs, c.hostname, c.env, stdout, stderr, &c.running)
	p.WorkDir = c.workDir
	p.Stdin = stdin
	p.Process = sandboxproc.ProcessOf(cmd)
	var spec runSpec
	if r.sandbox != nil {
		spec = r.spec(c, "", nil)
		spec.Process = p.Process
	}
	killed := c.done
	r.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-killed:
			cancel()
		case <-ctx.Done():
		}
	}()
	if len(cmd) == 1 && sandboxproc.IsShell(cmd[0]) && stdin != nil {
		prompt := ""
		if tty {
			prompt = "# "
		}
		if r.sandbox != nil {
			spec.Interactive, spec.Prompt = true, prompt
			return r.sandbox.exec(ctx, spec, stdin, stdout, stderr), nil
		}
		return p.Interactive(ctx, stdin, prompt), nil
	}
	script, params, err := sandboxproc.ArgvScript(cmd)
	if err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "Exec: cmd: %v", err)
	}
	if r.sandbox != nil {
		spec.Script, spec.Params = script, params
		return r.sandbox.exec(ctx, spec, stdin, stdout, stderr), nil
	}
	return p.Run(ctx, script, params), nil
}
