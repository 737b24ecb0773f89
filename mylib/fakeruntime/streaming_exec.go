package fakeruntime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"mvdan.cc/sh/v3/syntax"
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
		stdout = &crlfWriter{w: stdout}
		stderr = stdout
		if stdin != nil {
			stdin = newLineDiscipline(stdin, stdout)
		}
	}
	p := newProc(r.clock, c.fs, c.hostname, c.env, stdout, stderr, &c.running)
	p.workDir = c.workDir
	p.stdin = stdin
	p.process = processOf(cmd)
	var spec runSpec
	if r.sandbox != nil {
		spec = r.spec(c, "", nil)
		spec.Process = p.process
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
	if len(cmd) == 1 && isShell(cmd[0]) && stdin != nil {
		prompt := ""
		if tty {
			prompt = "# "
		}
		if r.sandbox != nil {
			spec.Interactive, spec.Prompt = true, prompt
			return r.sandbox.exec(ctx, spec, stdin, stdout, stderr), nil
		}
		return p.interactive(ctx, stdin, prompt), nil
	}
	script, params, err := argvScript(cmd)
	if err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "Exec: cmd: %v", err)
	}
	if r.sandbox != nil {
		spec.Script, spec.Params = script, params
		return r.sandbox.exec(ctx, spec, stdin, stdout, stderr), nil
	}
	return p.run(ctx, script, params), nil
}

// interactive is a shell reading its commands from in, one complete
// command at a time, keeping its variables and directory between them,
// until `exit` or the end of its input (then the last command's code).
//
// The commands it runs get no stdin: the shell itself reads it (the
// interpreter would copy a reader into a pipe of its own, so two readers
// would race for the same bytes).
func (p *proc) interactive(ctx context.Context, in io.Reader, prompt string) (code int) {
	defer p.recoverInternal(&code)
	defer p.running.cpu.start()()
	ctx, cancel := p.bindOOM(ctx)
	defer cancel()
	if !p.running.fork() {
		io.WriteString(p.stderr, errForkFailed+"\n")
		return 1
	}
	defer p.running.exit()
	defer p.enterProcess()()
	p.stdin = nil
	runner, err := p.newRunner(nil)
	if err != nil {
		return exitCode(ctx, err, p.stderr)
	}
	parser := syntax.NewParser(syntax.Variant(syntax.LangPOSIX))
	io.WriteString(p.stdout, prompt)
	exited := false
	bounded := &boundedInput{r: idleReader{r: in, m: &p.running.cpu}}
	err = parser.Interactive(bounded, func(stmts []*syntax.Stmt) bool {
		if parser.Incomplete() {
			if prompt != "" {
				io.WriteString(p.stdout, "> ")
			}
			return true
		}
		bounded.n = 0 // a complete command: the next one may be as long
		for _, st := range stmts {
			rewriteJobs(st)
			err := runner.Run(ctx, st)
			code = exitCode(ctx, err, p.stderr)
			if runner.Exited() || ctx.Err() != nil || errors.As(err, new(internalError)) {
				exited = true
				return false
			}
		}
		io.WriteString(p.stdout, prompt)
		return true
	})
	if err != nil && !exited && ctx.Err() == nil {
		io.WriteString(p.stderr, "sh: "+err.Error()+"\n")
		return 2
	}
	return code
}

// idleReader reads from r without counting the wait as the reader's CPU
// or holding its OS thread: a shell waiting at its prompt is idle.
type idleReader struct {
	r io.Reader
	m *cpuMeter
}

func (r idleReader) Read(p []byte) (int, error) {
	defer r.m.idle()()
	return r.r.Read(p)
}

// crlfWriter turns "\n" into "\r\n", as a terminal's output processing
// (onlcr) does.
type crlfWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (c *crlfWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// lineDiscipline is a terminal's canonical mode, best effort: what the
// user types is echoed; a line is handed to the shell on Enter (CR or LF);
// Backspace (DEL or ^H) erases; ^C drops the line; ^D on an empty line is
// the end of input.
type lineDiscipline struct {
	in      io.Reader
	echo    io.Writer
	pending []byte // read from in, not looked at yet
	line    []byte
	out     []byte // a finished line not yet read
	eof     bool
}

func newLineDiscipline(in io.Reader, echo io.Writer) *lineDiscipline {
	return &lineDiscipline{in: in, echo: echo}
}

// Read hands out one finished line at a time; it looks at (and echoes)
// what was typed after that line only when the shell asks for more, as a
// terminal does with type-ahead.
func (l *lineDiscipline) Read(p []byte) (int, error) {
	for len(l.out) == 0 {
		if len(l.pending) == 0 {
			if l.eof {
				return 0, io.EOF
			}
			buf := make([]byte, 256)
			n, err := l.in.Read(buf)
			l.pending = append(l.pending, buf[:n]...)
			if err != nil {
				l.eof = true
			}
			if n == 0 && l.eof {
				l.out = append(l.out, l.line...)
				l.line = nil
				if len(l.out) == 0 {
					return 0, io.EOF
				}
				break
			}
		}
		l.edit()
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

// edit applies pending bytes to the line until a line is finished.
func (l *lineDiscipline) edit() {
	for len(l.pending) > 0 && len(l.out) == 0 {
		b := l.pending[0]
		l.pending = l.pending[1:]
		switch b {
		case '\r', '\n':
			_, _ = l.echo.Write([]byte("\n"))
			l.out = append(append(l.out, l.line...), '\n')
			l.line = nil
		case 0x7f, 0x08:
			if len(l.line) > 0 {
				l.line = l.line[:len(l.line)-1]
				_, _ = l.echo.Write([]byte("\b \b"))
			}
		case 0x03:
			_, _ = l.echo.Write([]byte("^C\n# "))
			l.line = nil
		case 0x04:
			if len(l.line) == 0 {
				l.eof = true
				l.pending = nil
				return
			}
			l.out = append(l.out, l.line...)
			l.line = nil
		default:
			_, _ = l.echo.Write([]byte{b})
			l.line = append(l.line, b)
		}
	}
}
