package readmewalk

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults for steps that give no timeout= of their own.
const (
	DefaultCommandTimeout = 3 * time.Minute  // a foreground command (go run builds first)
	DefaultWaitTimeout    = 2 * time.Minute  // walk: wait
	DefaultStopTimeout    = 30 * time.Second // walk: ctrl-c, until the program exits
	retryInterval         = 2 * time.Second
)

// Walker walks READMEs in one working directory, keeping what a learner's
// terminals keep from one README to the next: the environment (exported
// variables) and the programs left running in the background.
type Walker struct {
	Dir string   // the repository copy the commands run in
	Env []string // the environment of the first session; updated after each README
	// Log receives a line per step (the test's t.Logf).
	Log func(format string, args ...any)
	// Out, when set, receives the transcript a learner would see: the
	// README's headings, each command as typed and what it printed, the
	// background programs started and stopped, and the observe
	// paragraphs (scripts/tour.sh prints it).
	Out io.Writer
	// JournalPath, when set, is a file that says what the walk has
	// running and would undo, for a walk killed outright (Recover).
	JournalPath string
	// External: the cluster is not the local control plane the README
	// starts (KUBECONFIG named another): steps marked local are skipped.
	External bool

	scratch       string
	interrupt     chan struct{} // closed by Interrupt
	interruptOnce sync.Once
	procs         map[string]*proc
	sessionPid    int              // the current README's shell, for the journal
	stopped       map[string]*proc // programs already stopped, by name: an expect after the Ctrl-C checks them at once
	seq           int
	last          string // what the last walk: run block printed, for an expect without name
	heading       string // the last heading shown in the transcript
}

// show writes a line of the transcript.
func (w *Walker) show(format string, args ...any) {
	if w.Out != nil {
		fmt.Fprintf(w.Out, format+"\n", args...)
	}
}

// showOutput writes what a command printed, indented as a terminal's
// output under its prompt would not be, so the commands stand out.
func (w *Walker) showOutput(out string) {
	if w.Out == nil {
		return
	}
	out = strings.TrimRight(out, "\n")
	if out == "" {
		return
	}
	for _, l := range strings.Split(out, "\n") {
		fmt.Fprintf(w.Out, "  %s\n", l)
	}
}

// showObserve writes an observe paragraph, wrapped.
func (w *Walker) showObserve(text string) {
	if w.Out == nil {
		return
	}
	line := "  observe:"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 100 {
			fmt.Fprintln(w.Out, line)
			line = "          "
		}
		line += " " + word
	}
	fmt.Fprintln(w.Out, line)
}

type proc struct {
	name     string
	pid      int
	out, err string // files with its stdout and stderr
	expect   *Step  // checked when it stops
	readme   string
	waitPos  [2]int // how far walk: wait has read its stdout and its stderr
	stopped  bool
	exitCode string
	until    string // chapter (two digits) that stops it; a README after it stops it first if the walk skipped it
}

// NewWalker returns a walker for dir; scratch holds its logs and scripts.
func NewWalker(dir, scratch string, env []string, log func(string, ...any)) *Walker {
	return &Walker{Dir: dir, Env: env, Log: log, scratch: scratch, procs: map[string]*proc{}, stopped: map[string]*proc{}, interrupt: make(chan struct{})}
}

// session is one bash, fed one command at a time.
type session struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	lines     chan string
	stderr    *lockedBuffer
	interrupt <-chan struct{} // the walker's: a command waited for ends the wait with ErrInterrupted
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (w *Walker) startSession() (*session, error) {
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = w.Dir
	cmd.Env = w.Env
	// A process group of its own: Ctrl-C in the tour's terminal reaches
	// the tour, which stops the step (Interrupt), not the session under it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &session{cmd: cmd, stdin: stdin, lines: make(chan string, 16), stderr: &lockedBuffer{}, interrupt: w.interrupt}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w.sessionPid = cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	// Job control gives each program started in the background a process
	// group of its own, as a terminal does: Ctrl-C reaches `go run` and the
	// program it runs, and SIGINT is not ignored in background jobs.
	if _, err := s.send("set -m", time.Minute); err != nil {
		return nil, err
	}
	return s, nil
}

// send writes a line of bash to the session and returns what it echoes
// before the end marker.
func (s *session) send(line string, timeout time.Duration) (string, error) {
	if _, err := io.WriteString(s.stdin, line+"\necho \"__WALK_DONE__ $?\"\n"); err != nil {
		return "", fmt.Errorf("the bash session is gone: %w (its stderr: %s)", err, s.stderr.String())
	}
	deadline := time.After(timeout)
	var got []string
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return "", fmt.Errorf("the bash session exited (its stderr: %s)", s.stderr.String())
			}
			if rest, found := strings.CutPrefix(l, "__WALK_DONE__ "); found {
				return strings.Join(got, "\n") + "\n" + rest, nil
			}
			got = append(got, l)
		case <-deadline:
			return "", fmt.Errorf("timed out after %s", timeout)
		case <-s.interrupt:
			return "", ErrInterrupted
		}
	}
}

func (s *session) close() {
	_ = s.stdin.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// runCommand runs one command in the session as a reader types it, with
// stdin closed, and returns its output (stdout and stderr, as a terminal
// shows them) and exit status.
func (w *Walker) runCommand(s *session, command string, timeout time.Duration) (string, int, error) {
	w.seq++
	script := filepath.Join(w.scratch, fmt.Sprintf("cmd-%03d.sh", w.seq))
	out := script + ".out"
	if err := os.WriteFile(script, []byte(command+"\n"), 0o600); err != nil {
		return "", 0, err
	}
	reply, err := s.send(fmt.Sprintf("source %q </dev/null >%q 2>&1", script, out), timeout)
	printed, _ := os.ReadFile(out)
	if err != nil {
		return string(printed), 0, fmt.Errorf("%s: %w", command, err)
	}
	fields := strings.Fields(reply)
	code, _ := strconv.Atoi(fields[len(fields)-1])
	return string(printed), code, nil
}

// Walk runs the steps of one README (its path relative to Dir, for
// messages) in a new bash session, and returns the first failure.
func (w *Walker) Walk(readme string) error {
	md, err := os.ReadFile(filepath.Join(w.Dir, readme))
	if err != nil {
		return err
	}
	steps, err := Parse(string(md))
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	s, err := w.startSession()
	if err != nil {
		return err
	}
	defer s.close()
	w.saveJournal(nil, readme) // this README's shell, for a tour killed in it
	m := func() Matcher { return Matcher{NodeName: envValue(w.Env, "NODE_NAME")} }
	w.heading = ""
	if err := w.stopLeftBehind(readme, m()); err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	var undo []string // the undo= of the steps walked, for a failure
	for _, st := range steps {
		where := fmt.Sprintf("%s:%d", readme, st.Line)
		start := time.Now()
		if st.Heading != w.heading && st.Action != Needs {
			w.heading = st.Heading
			w.show("\n\033[1m--- %s\033[0m   (%s:%d)", st.Heading, readme, st.Line)
		}
		if u := st.Attrs["undo"]; u != "" && st.Walked(w.External) {
			undo = append(undo, u)
			w.saveJournal(undo, readme)
		}
		err := w.step(s, st, readme, m)
		if err == nil && w.isInterrupted() {
			err = ErrInterrupted
		}
		if err != nil {
			// What the step started (a build, a cluster coming up) ends
			// with it, and what the README started before it is undone:
			// the machine is left as a walk started again expects it.
			w.stopStep(s)
			if len(undo) > 0 {
				// As the README's own cleanup does it: its programs
				// stopped (the kubelet), then what they ran on.
				if err := w.StopAll(); err != nil {
					w.Log("%s: stopping the programs before the undo: %v", readme, err)
				}
				w.undo(undo, readme)
			}
			w.saveJournal(nil, readme)
			return fmt.Errorf("%s (walk: %s): %w", where, st.Action, err)
		}
		if st.Action == Background || st.Action == CtrlC || st.Action == Wait {
			w.saveJournal(undo, readme)
		}
		w.Log("%s walk: %s %s (%s)", where, st.Action, summary(st), time.Since(start).Round(100*time.Millisecond))
		// Keep the environment current, so <node-name> follows NODE_NAME.
		if env, err := w.captureEnv(s); err == nil {
			w.Env = env
		}
	}
	env, err := w.captureEnv(s)
	if err != nil {
		return fmt.Errorf("%s: reading the environment at the end: %w", readme, err)
	}
	w.Env = env
	w.saveJournal(nil, readme) // walked through: its own steps undid what they started
	return nil
}

func summary(st Step) string {
	switch {
	case st.Action == Skip:
		return "(" + st.Attrs["reason"] + ")"
	case len(st.Block) > 0:
		first := strings.TrimPrefix(strings.TrimSpace(st.Block[0]), "$ ")
		if len(first) > 60 {
			first = first[:60] + "…"
		}
		return first
	default:
		return st.Name()
	}
}

func (w *Walker) captureEnv(s *session) ([]string, error) {
	file := filepath.Join(w.scratch, "env")
	if _, err := s.send(fmt.Sprintf("env -0 >%q", file), time.Minute); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var env []string
	for _, kv := range strings.Split(string(b), "\x00") {
		if kv != "" && !strings.HasPrefix(kv, "_=") {
			env = append(env, kv)
		}
	}
	return env, nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func (w *Walker) step(s *session, st Step, readme string, m func() Matcher) error {
	timeout, err := st.Duration("timeout", DefaultCommandTimeout)
	if err != nil {
		return err
	}
	retry, err := st.Duration("retry", 0)
	if err != nil {
		return err
	}
	if st.Local() && w.External {
		w.show("  (not run here: on the local control plane only; this tour uses KUBECONFIG=%s)", envValue(w.Env, "KUBECONFIG"))
		return nil
	}
	if st.External() && !w.External {
		w.show("  (not run here: on another cluster only, with KUBECONFIG set; this tour uses the local control plane)")
		return nil
	}
	switch st.Action {
	case Needs:
		return nil
	case Observe:
		w.showObserve(st.Text)
		return nil
	case Skip:
		w.show("  (not run here: %s)", st.Attrs["reason"])
		return nil
	case Run:
		if IsConsole(st.Block) {
			for _, cc := range Console(st.Block) {
				if err := w.runChecked(s, cc, st, timeout, retry, m); err != nil {
					return err
				}
			}
			return nil
		}
		w.last = ""
		for _, c := range Commands(st.Block) {
			w.show("$ %s", c)
			out, err := w.runOK(s, c, st, timeout, retry)
			if err != nil {
				return err
			}
			w.showOutput(out)
			w.last += out
		}
		return nil
	case Background:
		var command string
		var expect *Step
		if IsConsole(st.Block) {
			cc := Console(st.Block)
			if len(cc) != 1 {
				return fmt.Errorf("a background block has one command, this one has %d", len(cc))
			}
			command = cc[0].Command
			expect = &Step{Action: Expect, Block: cc[0].Output, Line: st.Line, Attrs: map[string]string{"name": st.Name()}}
		} else {
			cmds := Commands(st.Block)
			if len(cmds) != 1 {
				return fmt.Errorf("a background block has one command, this one has %d", len(cmds))
			}
			command = cmds[0]
		}
		return w.startBackground(s, st, command, expect, readme)
	case Expect:
		if st.Name() == "" {
			// The output of the block just run, as the reader sees it.
			return m().Match(st.Block, w.last, false)
		}
		p, ok := w.procs[st.Name()]
		if !ok {
			if done, ok := w.stopped[st.Name()]; ok {
				o, e := done.output()
				if err := m().Match(st.Block, o, false); err != nil {
					return fmt.Errorf("the output of %q: %w\n--- its stderr:\n%s", st.Name(), err, e)
				}
				return nil
			}
			return fmt.Errorf("no background program named %q has been started", st.Name())
		}
		cp := st
		p.expect = &cp
		p.readme = readme
		return nil
	case Wait:
		p, ok := w.procs[st.Name()]
		if !ok {
			return fmt.Errorf("no background program named %q has been started", st.Name())
		}
		wt, err := st.Duration("timeout", DefaultWaitTimeout)
		if err != nil {
			return err
		}
		if st.Attrs["exit"] == "true" {
			// A program that ends by itself: wait for it, then check it.
			deadline := time.Now().Add(wt)
			for alive(p.pid) {
				if w.isInterrupted() {
					return ErrInterrupted
				}
				if time.Now().After(deadline) {
					o, e := p.output()
					return fmt.Errorf("%q did not exit within %s; it printed:\n%s%s", p.name, wt, o, e)
				}
				time.Sleep(200 * time.Millisecond)
			}
			err := w.stop(p, m())
			delete(w.procs, st.Name())
			w.stopped[st.Name()] = p
			return err
		}
		re, err := regexp.Compile(st.Attrs["for"])
		if err != nil {
			return fmt.Errorf("for=: %w", err)
		}
		return w.waitFor(p, re, wt)
	case CtrlC:
		p, ok := w.procs[st.Name()]
		if !ok {
			return fmt.Errorf("no background program named %q has been started", st.Name())
		}
		w.show("^C   (in the terminal of %s)", st.Name())
		err := w.stop(p, m())
		if o, e := p.output(); w.Out != nil {
			w.showOutput(lastLines(o+e, 3))
		}
		delete(w.procs, st.Name())
		w.stopped[st.Name()] = p
		return err
	}
	return fmt.Errorf("unknown action %q", st.Action)
}

// runOK runs a shell command; it must succeed (or, with retry=, succeed
// within that time).
func (w *Walker) runOK(s *session, c string, st Step, timeout, retry time.Duration) (string, error) {
	deadline := time.Now().Add(retry)
	for {
		out, code, err := w.runCommand(s, c, timeout)
		if err != nil {
			return out, fmt.Errorf("%w\n%s", err, out)
		}
		wantFail := st.Attrs["fails"] == "true"
		if (code == 0) != wantFail {
			return out, nil
		}
		if time.Now().After(deadline) || w.isInterrupted() {
			if wantFail {
				return out, fmt.Errorf("$ %s\n%sexpected a non-zero exit status, got 0", c, out)
			}
			return out, fmt.Errorf("$ %s\n%sexit status %d", c, out, code)
		}
		time.Sleep(retryInterval)
	}
}

// runChecked runs a transcript's command and compares what it prints with
// the transcript (retrying with retry=, for a state that takes time to come).
func (w *Walker) runChecked(s *session, cc ConsoleCommand, st Step, timeout, retry time.Duration, m func() Matcher) error {
	deadline := time.Now().Add(retry)
	w.show("$ %s", cc.Command)
	for {
		out, code, err := w.runCommand(s, cc.Command, timeout)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		if time.Now().After(deadline) || m().Match(cc.Output, out, true) == nil {
			w.showOutput(out)
		}
		// A transcript is checked by what it prints, as a reader checks it:
		// `kubectl auth can-i` exits 1 when it prints "no". With fails, the
		// command must also exit non-zero.
		merr := m().Match(cc.Output, out, true)
		if merr == nil && code == 0 && st.Attrs["fails"] == "true" {
			merr = fmt.Errorf("expected a non-zero exit status, got 0")
		}
		if merr == nil {
			return nil
		}
		if time.Now().After(deadline) || w.isInterrupted() {
			return fmt.Errorf("$ %s: %w", cc.Command, merr)
		}
		time.Sleep(retryInterval)
	}
}

func (w *Walker) startBackground(s *session, st Step, command string, expect *Step, readme string) error {
	if old, ok := w.procs[st.Name()]; ok && !old.stopped {
		return fmt.Errorf("a background program named %q is still running (walk: ctrl-c it first)", st.Name())
	}
	w.seq++
	base := filepath.Join(w.scratch, fmt.Sprintf("bg-%03d-%s", w.seq, st.Name()))
	p := &proc{name: st.Name(), out: base + ".out", err: base + ".err", expect: expect, readme: readme, until: st.Attrs["until"]}
	if err := os.WriteFile(base+".sh", []byte(command+"\n"), 0o600); err != nil {
		return err
	}
	reply, err := s.send(fmt.Sprintf("source %q </dev/null >%q 2>%q &\necho \"__WALK_PID__ $!\"", base+".sh", p.out, p.err), time.Minute)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(reply, "\n") {
		if v, ok := strings.CutPrefix(l, "__WALK_PID__ "); ok {
			p.pid, _ = strconv.Atoi(v)
		}
	}
	if p.pid == 0 {
		return fmt.Errorf("could not start %q in the background: %s", command, reply)
	}
	w.procs[st.Name()] = p
	w.show("$ %s &   (in another terminal, %s: its output in %s)", command, st.Name(), p.out)
	if re, ok := st.Attrs["ready"]; ok {
		r, err := regexp.Compile(re)
		if err != nil {
			return fmt.Errorf("ready=: %w", err)
		}
		wt, err := st.Duration("timeout", DefaultWaitTimeout)
		if err != nil {
			return err
		}
		return w.waitFor(p, r, wt)
	}
	return nil
}

// lastLines returns the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// output is what a background program printed so far: stdout, then stderr.
func (p *proc) output() (stdout, stderr string) {
	o, _ := os.ReadFile(p.out)
	e, _ := os.ReadFile(p.err)
	return string(o), string(e)
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: a zombie has exited.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// waitFor waits until the program prints, after what earlier waits read, a
// line matching re, on stdout or stderr.
func (w *Walker) waitFor(p *proc, re *regexp.Regexp, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		o, e := p.output()
		// Each stream is read on from the line after the one the last
		// wait found in it.
		for i, text := range []string{o, e} {
			lines := strings.Split(text, "\n")
			for j := p.waitPos[i]; j < len(lines); j++ {
				if re.MatchString(lines[j]) {
					p.waitPos[i] = j + 1
					w.show("  %s: %s", p.name, lines[j])
					return nil
				}
			}
		}
		if !alive(p.pid) {
			return fmt.Errorf("%q exited before printing a line matching /%s/; it printed:\n%s%s", p.name, re, o, e)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%q did not print a line matching /%s/ within %s; it printed:\n%s%s", p.name, re, timeout, o, e)
		}
		if w.isInterrupted() {
			return ErrInterrupted
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop presses Ctrl-C: SIGINT to the program's process group, as a
// terminal sends it, waits for it to exit, and checks its expected output.
func (w *Walker) stop(p *proc, m Matcher) error {
	_ = syscall.Kill(-p.pid, syscall.SIGINT)
	deadline := time.Now().Add(DefaultStopTimeout)
	for alive(p.pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			o, e := p.output()
			return fmt.Errorf("%q did not exit within %s of Ctrl-C; it printed:\n%s%s", p.name, DefaultStopTimeout, o, e)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.stopped = true
	// Let the last lines reach the files.
	time.Sleep(100 * time.Millisecond)
	if p.expect == nil {
		return nil
	}
	o, e := p.output()
	if err := m.Match(p.expect.Block, o, false); err != nil {
		return fmt.Errorf("the output of %q (%s:%d) after Ctrl-C: %w\n--- its stderr:\n%s", p.name, p.readme, p.expect.Line, err, e)
	}
	return nil
}

// stopLeftBehind stops, before readme's first step, each program that a
// chapter before readme's should have stopped (background until="09": left
// running for the chapters before 09, which stops it). A full walk never
// needs it; a tour of some chapters (scripts/tour.sh 12 walks 04, then 12)
// skipped the chapter that presses that Ctrl-C, and the learner it stands
// for would have pressed it.
func (w *Walker) stopLeftBehind(readme string, m Matcher) error {
	num := chapterNumber(readme)
	if num == "" {
		return nil
	}
	var errs []error
	for name, p := range w.procs {
		if p.until == "" || num <= p.until {
			continue
		}
		w.show("^C   (in the terminal of %s: chapter %s stops it, and this walk skipped it)", name, p.until)
		if err := w.stop(p, m); err != nil {
			errs = append(errs, err)
		}
		delete(w.procs, name)
		w.stopped[name] = p
	}
	return errors.Join(errs...)
}

// chapterNumber is the two digits of chapters/NN-slug/README.md, or "".
func chapterNumber(readme string) string {
	dir := filepath.Base(filepath.Dir(readme))
	if !strings.HasPrefix(filepath.ToSlash(readme), "chapters/") || len(dir) < 3 || !chapterArgRe.MatchString(dir[:2]) {
		return ""
	}
	return dir[:2]
}

// StopAll presses Ctrl-C in every terminal still running a program and
// returns the failures (of the expected output of those that have one).
func (w *Walker) StopAll() error {
	var errs []error
	for name, p := range w.procs {
		if err := w.stop(p, Matcher{NodeName: envValue(w.Env, "NODE_NAME")}); err != nil {
			errs = append(errs, err)
		}
		delete(w.procs, name)
	}
	return errors.Join(errs...)
}

// Running lists the background programs still running.
func (w *Walker) Running() []string {
	var names []string
	for n := range w.procs {
		names = append(names, n)
	}
	return names
}
