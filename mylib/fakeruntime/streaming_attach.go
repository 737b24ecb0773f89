package fakeruntime

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// A container's terminal side, as containerd keeps one per container (its
// container IO): what its main process writes goes to its log and, live,
// to every attached session; what an attached session types goes to the
// process's stdin, when the container was created with Stdin.
//
// As containerd and the CRI say:
//   - Stdin false: the process reads an empty stdin, and an attached
//     session's input is dropped.
//   - Stdin true: stdin stays open between sessions; what a session sends
//     waits in a pipe until the process reads it. A session ends when its
//     input ends, once the process has read all of it and waits for more
//     (containerd ends it at once, racing the process's answer; waiting
//     keeps `echo ls | kubectl attach -i` from losing the output of ls), or
//     when the container exits. A script in the sandbox process reads a
//     pipe of its own: that process says how much it has read and when it
//     waits.
//   - StdinOnce: the end of the first session's input closes the
//     process's stdin for good (it reads EOF; a shell exits), and the
//     session streams the output until the container exits.
//   - Tty: stdout and stderr are one stream; what is typed is echoed and
//     edited a line at a time (lineDiscipline), and the sessions get
//     "\r\n" line ends as from a terminal. The log keeps plain lines.
//
// A main process that is a lone shell (`sh`, or an image whose default
// command is sh, as busybox) with Stdin reads its commands from stdin, with
// a prompt ("# ") when it has a TTY: `kubectl attach -it` and `kubectl
// debug -it --image=busybox` give a prompt. Without Stdin such a shell
// reads an empty stdin and exits 0 at once, as busybox's does.

// containerIO is one container's terminal side; nil for a container made
// before it (a test's) reads as no stdin and no sessions.
type containerIO struct {
	tty, stdinOnce bool
	stdin          *stdinPipe // nil without Config.Stdin

	mu       sync.Mutex
	sessions map[*attachSession]struct{}
}

func newContainerIO(cfg *runtimeapi.ContainerConfig) *containerIO {
	cio := &containerIO{tty: cfg.GetTty(), stdinOnce: cfg.GetStdinOnce(), sessions: map[*attachSession]struct{}{}}
	if cfg.GetStdin() {
		cio.stdin = newStdinPipe()
	}
	return cio
}

// attachSession is one attached client's output streams (nil: not wanted).
type attachSession struct {
	stdout, stderr io.Writer
}

// processIO returns what the main process reads and writes: the log's
// streams, copied to the sessions; with a TTY one stream, and stdin read
// through the line discipline. in is nil without Stdin.
func (cio *containerIO) processIO(stdout, stderr io.Writer) (in io.Reader, out, errw io.Writer) {
	if cio == nil {
		return nil, stdout, stderr
	}
	out = &teeWriter{log: stdout, cio: cio, stderr: false}
	errw = &teeWriter{log: stderr, cio: cio, stderr: true}
	if cio.tty {
		errw = out
	}
	if cio.stdin != nil {
		in = cio.stdin
		if cio.tty {
			in = sandboxproc.NewLineDiscipline(cio.stdin, out)
		}
	}
	return in, out, errw
}

// closeStdin ends the process's stdin (it reads EOF): on StdinOnce, and
// when the container exits, so that nothing waits on it any more.
func (cio *containerIO) closeStdin() {
	if cio != nil && cio.stdin != nil {
		cio.stdin.Close()
	}
}

// teeWriter writes to the log, then to each session.
type teeWriter struct {
	log    io.Writer
	cio    *containerIO
	stderr bool
}

func (w *teeWriter) Write(p []byte) (int, error) {
	n, err := w.log.Write(p)
	w.cio.broadcast(p, w.stderr)
	return n, err
}

// broadcast writes p to the sessions; one whose client is gone stops
// getting output.
func (cio *containerIO) broadcast(p []byte, stderr bool) {
	cio.mu.Lock()
	defer cio.mu.Unlock()
	for s := range cio.sessions {
		w := s.stdout
		if stderr && !cio.tty {
			w = s.stderr
		}
		if w == nil {
			continue
		}
		if _, err := w.Write(p); err != nil {
			delete(cio.sessions, s)
		}
	}
}

func (cio *containerIO) add(s *attachSession) {
	cio.mu.Lock()
	defer cio.mu.Unlock()
	cio.sessions[s] = struct{}{}
}

func (cio *containerIO) remove(s *attachSession) {
	cio.mu.Lock()
	defer cio.mu.Unlock()
	delete(cio.sessions, s)
}

// attachStreams runs one attach session on container id: its output from
// now on goes to stdout and stderr (stdin, if any, to the container's
// stdin) until the container exits, the client goes (ctx), or, for a
// container whose stdin stays open, the session's input ended and the
// process read all of it.
func (r *Runtime) attachStreams(ctx context.Context, id string, stdin io.Reader, stdout, stderr io.Writer) error {
	r.mu.Lock()
	c, err := r.findContainer(id)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING || c.done == nil {
		r.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "Attach %s: container is %s, not running", short(c.id), c.state)
	}
	cio, done := c.io, c.done
	r.mu.Unlock()
	if cio == nil {
		<-done
		return nil
	}
	if cio.tty {
		stdout, stderr = &sandboxproc.CrlfWriter{W: stdout}, nil
	}
	s := &attachSession{stdout: stdout, stderr: stderr}
	cio.add(s)
	defer cio.remove(s)

	inputEnded := make(chan struct{})
	switch {
	case stdin == nil:
		inputEnded = nil // never: the session lasts as long as the container
	case cio.stdin == nil:
		go func() { _, _ = io.Copy(io.Discard, stdin) }() // no stdin: dropped
		inputEnded = nil
	default:
		go func() {
			_, _ = io.Copy(cio.stdin, stdin) // ends with the input, or when stdin is closed
			close(inputEnded)
		}()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return nil
	case <-inputEnded:
	}
	if cio.stdinOnce {
		cio.stdin.Close()
		select {
		case <-done:
		case <-ctx.Done():
		}
		return nil
	}
	cio.stdin.waitRead(ctx, done)
	return nil
}

// stdinPipe is a container's stdin: sessions write, the process reads;
// unlike io.Pipe a write does not wait for the reader, and the pipe
// outlives its writers until closed.
type stdinPipe struct {
	mu      sync.Mutex
	buf     []byte
	closed  bool
	waiting bool          // the reader waits for more, having read everything
	changed chan struct{} // closed and replaced at each change

	// remote: the reader copies to a sandbox process (sandboxproc.go),
	// which says how much its script has read (consumed) and that it waits
	// for more: the script has read everything once consumed equals what
	// the copy took from the pipe (taken, after the TTY's line editing).
	remote          bool
	taken, consumed int64
}

// remoteReader is what the sandbox process's copy reads: r (the pipe, or
// the line discipline over it), counted.
type remoteReader struct {
	r    io.Reader
	pipe *stdinPipe
}

func (c *remoteReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.pipe.mu.Lock()
	c.pipe.taken += int64(n)
	c.pipe.mu.Unlock()
	return n, err
}

// stdinConsumed is the sandbox process's word: its script read n bytes of
// stdin in all and waits for more.
func (c *remoteReader) stdinConsumed(n int64) {
	c.pipe.mu.Lock()
	defer c.pipe.mu.Unlock()
	c.pipe.consumed = n
	c.pipe.signal()
}

// readRemotely returns what a sandbox process's copy of the container's
// stdin must read: in, counted.
func (p *stdinPipe) readRemotely(in io.Reader) io.Reader {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remote = true
	return &remoteReader{r: in, pipe: p}
}

func newStdinPipe() *stdinPipe { return &stdinPipe{changed: make(chan struct{})} }

// signal wakes whoever waits for a change. Caller holds mu.
func (p *stdinPipe) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *stdinPipe) Read(b []byte) (int, error) {
	for {
		p.mu.Lock()
		if len(p.buf) > 0 {
			n := copy(b, p.buf)
			p.buf = p.buf[n:]
			p.waiting = false
			p.signal()
			p.mu.Unlock()
			return n, nil
		}
		if p.closed {
			p.mu.Unlock()
			return 0, io.EOF
		}
		if !p.waiting {
			p.waiting = true
			p.signal()
		}
		ch := p.changed
		p.mu.Unlock()
		<-ch
	}
}

func (p *stdinPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, io.ErrClosedPipe
	}
	if len(p.buf)+len(b) > sandboxproc.MaxScriptBytes {
		return 0, io.ErrShortWrite // a client pasting megabytes the process does not read
	}
	p.buf = append(p.buf, b...)
	p.signal()
	return len(b), nil
}

func (p *stdinPipe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.signal()
	}
	return nil
}

// waitRead waits until the reader has read everything written and waits
// for more (or the pipe is closed), or done or ctx ends.
func (p *stdinPipe) waitRead(ctx context.Context, done <-chan struct{}) {
	for {
		p.mu.Lock()
		if p.closed || (len(p.buf) == 0 && p.waiting && (!p.remote || p.consumed == p.taken)) {
			p.mu.Unlock()
			return
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return
		case <-ctx.Done():
			return
		}
	}
}
