package sandboxproc

// interactive is a shell reading its commands from in, one complete
// command at a time, keeping its variables and directory between them,
// until `exit` or the end of its input (then the last command's code).
//
// The commands it runs get no stdin: the shell itself reads it (the
// interpreter would copy a reader into a pipe of its own, so two readers
// would race for the same bytes).

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

func (p *proc) Interactive(ctx context.Context, in io.Reader, prompt string) (code int) {
	defer p.recoverInternal(&code)
	defer p.running.cpu.start(ctx.Done())()
	ctx, cancel := p.bindOOM(ctx)
	defer cancel()
	if !p.running.fork() {
		io.WriteString(p.stderr, ErrForkFailed+"\n")
		return 1
	}
	defer p.running.exit()
	defer p.enterProcess()()
	p.Stdin = nil
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

// CrlfWriter turns "\n" into "\r\n", as a terminal's output processing
// (onlcr) does.
type CrlfWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (c *CrlfWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.W.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
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

func NewLineDiscipline(in io.Reader, echo io.Writer) *lineDiscipline {
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
