package sandboxproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// A container's process is a POSIX shell script run by the pure-Go
// interpreter of mvdan.cc/sh/v3 inside the runtime's own process. Nothing of
// the host is ever executed: the shell's builtins (echo, printf, test, exit,
// trap, cd, read, …) are the interpreter's, and the few utilities a pod's
// command usually needs (sleep, cat, touch, rm, mkdir, ls, date, env,
// printenv, hostname, sh -c) are written in Go: proc.exec below runs them,
// the longer ones in shell_utilities.go. Any other command is "not found"
// (exit code 127) inside the container. Every file the script
// opens, lists or tests is looked up in the container's view: its mounts,
// else its root directory (shell_fs.go), each through an os.Root, which
// refuses any path or symlink that leads out of it.

// ExitCodeNotFound is the exit code of a command the runtime does not
// provide, as a shell reports it.
const ExitCodeNotFound = 127

// ExitCodeSIGTERM is the exit code of a process ended by SIGTERM (128+15).
const ExitCodeSIGTERM = 143

// ExitCodeSIGKILL is what a container killed by SIGKILL exits with (128+9).
const ExitCodeSIGKILL = 137

// Utilities are the commands, besides the shell's builtins, that a script
// can run, as their names in /bin. Everything else exits 127.
// The server commands (agnhost, etcd, goproxy, nginx) are in shell_servers.go.
var Utilities = []string{"agnhost", "cat", "date", "env", "etcd", "goproxy", "hostname", "ls", "mkdir", "nginx", "printenv", "ps", "rm", "pgrep", "sh", "sleep", "stress", "tail", "top", "touch"}

// proc is one script running in a container: its main process, or a
// command run by ExecSync.
type proc struct {
	clock    Clock
	fs       *ContainerFS // its root and mounts (shell_fs.go)
	hostname string
	env      []string
	WorkDir  string    // the script's starting directory in the container ("" is /)
	Stdin    io.Reader // nil: none (a container's main process; ExecSync)
	stdout   io.Writer
	stderr   io.Writer

	*signals
	// running is the container's processes (ps, pgrep) and limits;
	// shared by the container's main script and its execs.
	running *ProcTable
	// Process is the command line ps lists this script as
	// (pid_namespace.go); nil: it is not listed, only the utilities it
	// runs. quiet: the utilities it runs are not listed either.
	Process []string
	quiet   bool
	// Net is where the server commands listen (shell_servers.go); nil in an exec.
	Net *ContainerNet
	// defs is the sizes of its aliases and eval's functions (shell_defs.go).
	defs definitions
}

// ProcTable counts the utilities running in a container, and holds its
// limits (shell_limits.go) and what it uses (shell_usage.go).
type ProcTable struct {
	mu    sync.Mutex
	pidns *PidNamespace // its own, made on first use, or its pod's or target's (pid_namespace.go)
	Limits
	cpu     cpuMeter
	Traffic netCounters
}

// signals is a process's SIGTERM: its trap and its delivery, shared with
// the `sh -c` it runs.
type signals struct {
	// mu guards the fields. termTrap is nil while the script sets no trap
	// for TERM: like PID 1 in a container, it then ignores SIGTERM. term is
	// closed when SIGTERM arrives.
	mu       sync.Mutex
	termTrap *string
	termDone bool // the trap ran
	term     chan struct{}
}

func NewProc(clk Clock, view *ContainerFS, hostname string, env []string, stdout, stderr io.Writer, running *ProcTable) *proc {
	return &proc{clock: clk, fs: view, hostname: hostname, env: env, stdout: stdout, stderr: stderr, signals: &signals{term: make(chan struct{})}, running: running}
}

// Sigterm delivers SIGTERM. It reports whether the script traps it (a
// script that does not ignores it, as PID 1 does).
func (p *signals) Sigterm() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.term:
	default:
		close(p.term)
	}
	return p.termTrap != nil && *p.termTrap != ""
}

// pendingTrap returns the TERM trap's command once, after SIGTERM arrived.
func (p *signals) pendingTrap() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.term:
	default:
		return "", false
	}
	if p.termDone || p.termTrap == nil || *p.termTrap == "" {
		return "", false
	}
	p.termDone = true
	return *p.termTrap, true
}

// ArgvScript turns a container's argv into a script: `sh -c SCRIPT [$0
// args…]` runs SCRIPT; anything else runs as one simple command.
func ArgvScript(argv []string) (script string, params []string, err error) {
	if len(argv) >= 3 && IsShell(argv[0]) && argv[1] == "-c" {
		return argv[2], argv[3:], nil
	}
	if len(argv) == 1 && IsShell(argv[0]) {
		return "", nil, nil // a shell with no terminal and no script exits at once
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		if quoted[i], err = syntax.Quote(a, syntax.LangPOSIX); err != nil {
			return "", nil, fmt.Errorf("argument %q: %w", a, err)
		}
	}
	return strings.Join(quoted, " "), nil, nil
}

func IsShell(name string) bool {
	switch utilityName(name) {
	case "sh", "bash", "ash":
		return true
	}
	return false
}

// utilityName is the command name without a /bin-like directory.
func utilityName(name string) string {
	for _, dir := range []string{"/bin/", "/usr/bin/", "/sbin/", "/usr/sbin/", "/usr/local/bin/", "/"} {
		if n, ok := strings.CutPrefix(name, dir); ok && !strings.Contains(n, "/") {
			return n
		}
	}
	return name
}

// Run runs script with positional parameters params ($0 first) and returns
// its exit code. A cancelled ctx is a SIGKILL: 137.
func (p *proc) Run(ctx context.Context, script string, params []string) (code int) {
	defer p.recoverInternal(&code)
	ctx, cancel := p.bindOOM(ctx)
	defer cancel()
	if !p.running.fork() {
		fmt.Fprintln(p.stderr, ErrForkFailed)
		return 1
	}
	defer p.running.exit()
	defer p.enterProcess()()
	// Counted on a thread of its own (shell_usage.go), once it is a
	// process: a fork that fails costs no thread.
	defer p.running.cpu.start(ctx.Done())()
	file, err := ParseScript(script)
	if err != nil {
		fmt.Fprintf(p.stderr, "sh: %v\n", err)
		return 2
	}
	runner, err := p.newRunner(params)
	if err != nil {
		fmt.Fprintf(p.stderr, "sh: %v\n", err)
		return 2
	}
	return exitCode(ctx, runner.Run(ctx, file), p.stderr)
}

// TestHookExec, if set, is called with each command's name before the
// command runs (tests use it to make a command panic).
// Atomic: a container the test's runtime killed may still be running a
// command when the test's cleanup takes the hook away.
var TestHookExec atomic.Pointer[func(name string)]

// codeExec plays a bug of the interpreter that lets a pod's script run
// code of its own in the sandbox process: a script that runs
// codeExecCommand calls it with its arguments. It is nil, so the command
// is not found, except in a binary built with the tag mykubelet_codeexec
// (codeexec_hook.go), which only the walls' test builds.
var codeExec func(args []string, stdout io.Writer) int

const codeExecCommand = "mykubelet-codeexec"

// recoverInternal turns a panic of the interpreter (or of a utility) on the
// script's goroutine into the end of that script alone, exit code 2, with
// one line on its stderr, as a shell reports its own internal errors: the
// runtime and the other containers go on. A panic on a goroutine the
// interpreter starts itself (one side of a pipeline, a here-document's
// writer) cannot be caught here.
func (p *proc) recoverInternal(code *int) {
	v := recover()
	if v == nil {
		return
	}
	fmt.Fprintf(p.stderr, "sh: %v\n", internalError{v})
	*code = ExitCodeInternalError
}

// exitCode is the exit code of a Run that returned err.
func exitCode(ctx context.Context, err error, stderr io.Writer) int {
	if ctx.Err() != nil {
		return ExitCodeSIGKILL
	}
	if err == nil {
		return 0
	}
	if code, ok := interp.IsExitStatus(err); ok {
		return int(code)
	}
	if errors.Is(err, errOOM) {
		return ExitCodeSIGKILL // the OOM killer's SIGKILL, which no shell reports
	}
	fmt.Fprintf(stderr, "sh: %v\n", err)
	if errors.As(err, new(internalError)) {
		return ExitCodeInternalError
	}
	return 1
}

// newRunner is the interpreter for the process, with positional
// parameters params ($0 first).
func (p *proc) newRunner(params []string) (*interp.Runner, error) {
	env := &containerEnv{Environ: expand.ListEnviron(p.env...), p: p}
	opts := []interp.RunnerOption{
		interp.Env(env),
		interp.Dir("/"), // the container's /, as every handler below sees it
		interp.StdIO(p.Stdin, p.stdout, p.stderr),
		// Guarded: a panic in one ends its command, not the process (shell_guard.go).
		interp.CallHandler(guardCall(p.call)),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return guardExec(p.exec) }),
		interp.OpenHandler(guardOpen(p.open)),
		interp.ReadDirHandler2(guardReadDir(p.readDir)),
		interp.StatHandler(guardStat(p.stat)),
		interp.AccessHandler(guardAccess(p.access)),
	}
	if len(params) > 0 {
		opts = append(opts, interp.Params(append([]string{"--"}, params[1:]...)...))
	}
	runner, err := interp.New(opts...)
	if err != nil {
		return nil, err
	}
	if p.WorkDir != "" {
		runner.Dir = path.Clean("/" + p.WorkDir) // a path in the container, which interp.Dir would look up on the host
	}
	// The first Reset takes the runner's temporary directory from TMPDIR:
	// fifoDir then, the container's TMPDIR afterwards (shell_hostfacts.go).
	env.resetting = true
	runner.Reset()
	env.resetting = false
	return runner, nil
}

// call runs before every simple command. It throttles a container over
// its CPU limit (shell_usage.go). It keeps the TERM trap, which
// the interpreter does not implement (it knows EXIT and ERR only), and runs
// it before the next command once SIGTERM has arrived.
//
// It is also the one place every builtin's arguments pass before the
// interpreter parses them (eval, . and source, trap, alias, unset's
// subscripts): builtinCall finds the builtin that will run behind
// `builtin` and `command` as the interpreter dispatches them, so that
// `builtin eval "$p"` meets the same bounds (boundedInput) as `eval "$p"`.
func (p *proc) call(ctx context.Context, args []string) ([]string, error) {
	// Every command, builtins too, passes here: where a container over its
	// CPU quota waits for its next period (shell_usage.go).
	p.running.cpu.throttle(ctx.Done())
	if err := p.checkLimits(ctx, args); err != nil {
		return nil, err
	}
	if trap, ok := p.pendingTrap(); ok {
		// Run the trap, then the command, as one eval.
		quoted := make([]string, len(args))
		for i, a := range args {
			q, err := syntax.Quote(a, syntax.LangPOSIX)
			if err != nil {
				q = "false" // unquotable (a NUL byte): cannot run it anyway
			}
			quoted[i] = q
		}
		return []string{"eval", trap + "\n" + strings.Join(quoted, " ")}, nil
	}
	wrappers, cmd := builtinCall(args)
	out := p.callBuiltin(ctx, cmd)
	if len(wrappers) == 0 || (len(out) > 0 && !interp.IsBuiltin(out[0])) {
		return out, nil // an internal utility (pwd -P, lookups) runs in exec: no wrapper reaches it
	}
	return append(slices.Clip(wrappers), out...), nil
}

// builtinCall splits args as the interpreter dispatches a call: the words
// of `builtin NAME` and `command [--] NAME` in front of a builtin NAME
// (wrappers: kept, they bypass a function of the same name), and the
// builtin's call that runs behind them. These two are the interpreter's
// only builtins that run another builtin (`exec NAME` runs the exec
// handler, where no builtin is); a `command` with options (-v) runs none.
// A function named builtin or command would run instead: splitting then
// only bounds what needs no bound.
func builtinCall(args []string) (wrappers, call []string) {
	i := 0
	for i < len(args)-1 {
		next := i + 1
		switch args[i] {
		case "builtin":
		case "command":
			if args[next] == "--" {
				next++
			}
		default:
			return args[:i], args[i:]
		}
		if next >= len(args) || !interp.IsBuiltin(args[next]) {
			break
		}
		i = next
	}
	return args[:i], args[i:]
}

// callBuiltin rewrites the call of a builtin (args, without wrappers) for
// the container: what the interpreter would do on the host, or parse
// unbounded, is done here.
func (p *proc) callBuiltin(ctx context.Context, args []string) []string {
	switch args[0] {
	case "pwd":
		if slices.Contains(args[1:], "-P") { // the interpreter's resolves symlinks on the host
			return []string{pwdPhysical}
		}
	case ".", "source":
		if len(args) > 1 {
			args = slices.Clone(args)
			args[1] = sourceMarker + p.sourcePath(interp.HandlerCtx(ctx), args[1])
			return args
		}
	case "export", "readonly", "local":
		// Parsed as POSIX, these are plain commands, which the interpreter
		// only knows as declaration clauses of its bash parser: hand them
		// to eval, which parses bash.
		return []string{"eval", declaration(args)}
	case "eval":
		// The interpreter's eval parses bash, with its background
		// statements as they are: parse POSIX, as sh does, and rewrite
		// them (rewriteJobs).
		f, err := ParseScript(strings.Join(args[1:], " "))
		if err != nil {
			return failing("eval", err)
		}
		src, err := printScriptChecked(f)
		if err != nil {
			return failing("eval", err)
		}
		p.defs.defineFunctions(f)
		return []string{"eval", src}
	case "alias":
		for _, a := range args[1:] {
			if name, value, ok := strings.Cut(a, "="); ok {
				if err := checkWords(value); err != nil {
					return failing("alias", err)
				}
				p.defs.set("alias "+name, 2*len(value)) // its text and its parsed words
			}
		}
	case "unalias":
		for _, a := range args[1:] {
			if a == "-a" {
				p.defs.removeAliases()
			}
			p.defs.remove("alias " + a)
		}
	case "unset":
		functions := slices.Contains(args[1:], "-f")
		for _, a := range args[1:] {
			if i := strings.IndexByte(a, '['); i > 0 && strings.HasSuffix(a, "]") {
				if err := checkArithmetic(a[i+1 : len(a)-1]); err != nil {
					return failing("unset", err)
				}
			}
			if functions {
				p.defs.remove("func " + a)
			}
		}
	case "test", "[":
		// The interpreter parses test's arguments recursively, a level
		// for each "(", "!", -a and -o.
		if n := testNesting(args[1:]); n > maxTestNesting {
			return failing(args[0], fmt.Errorf("expression nested too deep (%d levels, at most %d)", n, maxTestNesting))
		}
	case "type", "hash", "command":
		// These search PATH with os.Stat on the host's file system: answer
		// them here instead, from the builtins and the utilities.
		if args[0] != "command" || (len(args) > 1 && (args[1] == "-v" || args[1] == "-V")) {
			return append([]string{lookupCommand}, args...)
		}
	case "trap":
		return p.trap(args)
	}
	return args
}

// failing is a call that prints "sh: NAME: ERR" and fails, as a builtin
// that refuses its arguments.
func failing(name string, err error) []string {
	return []string{"eval", "echo " + quoteOrFalse("sh: "+name+": "+err.Error()) + " >&2; false"}
}

// maxTestNesting bounds the levels of test's expression ("(", "!", -a,
// -o), which the interpreter parses and evaluates recursively: a test
// with hundreds of thousands of "(" arguments would overflow the stack as
// a deeply nested script does (maxParseFrames).
const maxTestNesting = 1000

// testNesting counts the arguments of test that nest its expression.
func testNesting(args []string) int {
	n := 0
	for _, a := range args {
		switch a {
		case "(", "!", "-a", "-o":
			n++
		}
	}
	return n
}

// trap rewrites `trap [-] [--] ACTION SIGNAL…`: the action, which the
// interpreter parses as bash when the trap runs, is parsed as sh now,
// bounded and rewritten as every script is; a TERM trap is kept here.
// Its options are read as the interpreter reads them: `-` (none) and
// `--`; any other option is an error of the interpreter's, which then
// sets no trap.
func (p *proc) trap(args []string) []string {
	i := 1
options:
	for ; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			i++
			break options
		case a == "-":
		case a != "" && (a[0] == '-' || a[0] == '+'):
			return args // the interpreter's usage error
		default:
			break options
		}
	}
	if len(args)-i < 2 {
		return args // print the traps, or reset one
	}
	action, sigs := args[i], args[i+1:]
	if action != "-" && action != "" {
		f, err := ParseScript(action)
		if err == nil {
			action, err = printScriptChecked(f)
		}
		if err != nil {
			return failing("trap", err)
		}
	}
	rest := []string{"trap", "--", action}
	for _, s := range sigs {
		switch s {
		case "TERM", "SIGTERM", "15":
			p.mu.Lock()
			if action == "-" {
				p.termTrap = nil
			} else {
				a := action
				p.termTrap = &a
			}
			p.mu.Unlock()
		default:
			rest = append(rest, s)
		}
	}
	if len(rest) == 3 {
		return []string{"true"}
	}
	return rest
}

// exec runs the utilities; any other command is not found.
func (p *proc) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	name := utilityName(args[0])
	if hook := TestHookExec.Load(); hook != nil {
		(*hook)(name)
	}
	if codeExec != nil && name == codeExecCommand {
		return exitStatus(codeExec(args[1:], hc.Stdout))
	}
	switch name {
	case lookupCommand:
		return p.lookup(hc, args[1:])
	case tickCommand:
		return exitStatus(hc.LastExitStatus)
	case ExpandsCommand: // charged by the call handler
		return nil
	case pwdPhysical:
		fmt.Fprintln(hc.Stdout, p.physicalDir(hc.Dir))
		return nil
	case jobCommand:
		if len(args) != 2 {
			return interp.NewExitStatus(2)
		}
		return p.job(ctx, hc, args[1])
	}
	if !IsShell(name) { // sh counts itself, in run
		if !p.running.fork() {
			fmt.Fprintln(hc.Stderr, ErrForkFailed)
			return interp.NewExitStatus(1)
		}
		defer p.running.exit()
	}
	// A utility on a goroutine the interpreter started (a pipeline's
	// left side) counts its own CPU time; on the script's, it is counted.
	defer p.running.cpu.start(ctx.Done())()
	if !p.quiet {
		defer p.running.leave(p.running.enter(args))
	}
	switch name {
	case "stress":
		return p.stress(ctx, hc, args[1:])
	case "pgrep":
		if len(args) != 2 {
			fmt.Fprintln(hc.Stderr, "pgrep: usage: pgrep NAME")
			return interp.NewExitStatus(2)
		}
		pids := p.running.Namespace().pids(args[1])
		for _, pid := range pids {
			fmt.Fprintln(hc.Stdout, pid)
		}
		if len(pids) == 0 {
			return interp.NewExitStatus(1)
		}
		return nil
	case "ps":
		// busybox's columns, and the processes of the container's PID
		// namespace (pid_namespace.go); every one has used no CPU time.
		fmt.Fprintln(hc.Stdout, "PID   USER     TIME  COMMAND")
		for _, e := range p.running.Namespace().List() {
			fmt.Fprintf(hc.Stdout, "%5d %-8s  0:00 %s\n", e.pid, e.user, e.Args)
		}
		return nil
	case "sleep":
		return p.sleep(ctx, hc, args[1:])
	case "cat":
		return p.cat(ctx, hc, args[1:])
	case "tail": // shell_tail.go
		return p.tail(ctx, hc, args[1:])
	case "touch":
		return p.each(hc, args, func(rel string) error {
			f, _, err := p.fs.OpenFile(rel, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			f.Close()
			now := p.clock.Now()
			return p.fs.Chtimes(rel, now, now)
		})
	case "rm":
		force, recursive, files := false, false, []string{}
		for _, a := range args[1:] {
			switch {
			case a == "-f":
				force = true
			case a == "-r" || a == "-R":
				recursive = true
			case a == "-rf" || a == "-fr":
				force, recursive = true, true
			default:
				files = append(files, a)
			}
		}
		return p.each(hc, append([]string{"rm"}, files...), func(rel string) error {
			var err error
			if recursive {
				if _, err = p.fs.Lstat(rel); err == nil {
					err = p.fs.RemoveAll(rel)
				}
			} else {
				err = p.fs.Remove(rel)
			}
			if force && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		})
	case "mkdir":
		parents := slices.Contains(args[1:], "-p")
		dirs := slices.DeleteFunc(slices.Clone(args[1:]), func(a string) bool { return a == "-p" })
		return p.each(hc, append([]string{"mkdir"}, dirs...), func(rel string) error {
			if parents {
				return p.fs.MkdirAll(rel, 0o755)
			}
			return p.fs.Mkdir(rel, 0o755)
		})
	case "ls":
		return p.ls(hc, args[1:])
	case "date":
		now := p.clock.Now().UTC()
		if len(args) > 1 && args[1] == "+%s" {
			fmt.Fprintln(hc.Stdout, now.Unix())
		} else {
			fmt.Fprintln(hc.Stdout, now.Format("Mon Jan _2 15:04:05 UTC 2006"))
		}
		return nil
	case "env", "printenv":
		return p.printenv(hc, name, args[1:])
	case "hostname":
		fmt.Fprintln(hc.Stdout, p.hostname)
		return nil
	case "top":
		// A process that runs until killed, as busybox's top does in a
		// container with no terminal; it ends on SIGTERM.
		defer p.running.cpu.idle()()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.term:
			return interp.NewExitStatus(ExitCodeSIGTERM)
		}
	case "sh", "bash", "ash":
		script, params, err := ArgvScript(append([]string{"sh"}, args[1:]...))
		if err != nil || (len(args) > 1 && args[1] != "-c") {
			fmt.Fprintf(hc.Stderr, "%s: only %s -c SCRIPT is supported\n", name, name)
			return interp.NewExitStatus(2)
		}
		sub := &proc{clock: p.clock, fs: p.fs, hostname: p.hostname, env: environ(hc.Env), WorkDir: hc.Dir, Stdin: hc.Stdin, stdout: hc.Stdout, stderr: hc.Stderr, signals: p.signals, running: p.running, Net: p.Net, quiet: p.quiet}
		code := sub.Run(ctx, script, params)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return exitStatus(code) // not NewExitStatus(0): the interpreter panics on an exit status error of 0
	}
	if err, ok := p.server(ctx, hc, name, args[1:]); ok {
		return err
	}
	fmt.Fprintf(hc.Stderr, "sh: %s: command not found (the fake runtime runs no programs: see fakeruntime.Utilities)\n", args[0])
	return interp.NewExitStatus(ExitCodeNotFound)
}

// declaration is a declaration command (export a=1 b) as bash source, its
// names bare and its values quoted.
func declaration(args []string) string {
	words := []string{args[0]}
	for _, a := range args[1:] {
		name, value, isAssign := strings.Cut(a, "=")
		switch {
		case isAssign && syntax.ValidName(name):
			words = append(words, name+"="+quoteOrFalse(value))
		case syntax.ValidName(name) || isOption(a):
			words = append(words, a)
		default:
			words = append(words, quoteOrFalse(a))
		}
	}
	return strings.Join(words, " ")
}

// isOption reports whether a is an option of letters (-p, -fx): any other
// word is quoted, for the source that declaration builds is parsed, and
// the parse of a word such as -$($($(… is not bounded there.
func isOption(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	for _, c := range a[1:] {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// quoteOrFalse quotes s for a script, or is "false" if it cannot be.
func quoteOrFalse(s string) string {
	q, err := syntax.Quote(s, syntax.LangPOSIX)
	if err != nil {
		return "false"
	}
	return q
}

// pwdPhysical is the internal name under which call hands pwd -P to
// exec (like lookupCommand).
const pwdPhysical = "\x00pwd-P"

// lookupCommand is the internal name under which call hands type, hash
// and command -v to exec (a name no script can type: it has a NUL byte).
const lookupCommand = "\x00lookup"

// lookup answers type, hash and command -v/-V: a builtin or a utility is
// found, anything else is not (there is no PATH to search).
func (p *proc) lookup(hc interp.HandlerContext, args []string) error {
	cmd, names := args[0], args[1:]
	if cmd == "command" || (len(names) > 0 && strings.HasPrefix(names[0], "-")) {
		names = names[1:]
	}
	failed := false
	for _, n := range names {
		switch {
		case interp.IsBuiltin(n) && cmd == "type":
			fmt.Fprintf(hc.Stdout, "%s is a shell builtin\n", n)
		case slices.Contains(Utilities, utilityName(n)) && cmd == "type":
			fmt.Fprintf(hc.Stdout, "%s is /bin/%s\n", n, utilityName(n))
		case interp.IsBuiltin(n):
			fmt.Fprintln(hc.Stdout, n)
		case slices.Contains(Utilities, utilityName(n)):
			if cmd == "command" {
				fmt.Fprintln(hc.Stdout, "/bin/"+utilityName(n))
			}
		default:
			if cmd != "command" {
				fmt.Fprintf(hc.Stderr, "%s: %s: not found\n", cmd, n)
			}
			failed = true
		}
	}
	if failed {
		return interp.NewExitStatus(1)
	}
	return nil
}
