package sandboxproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// A container's scripts run on the runtime's own goroutines and heap, so
// the runtime itself stands in for the kernel's limits: what a cgroup's
// pids.max and memory.max would stop, the interpreter's handlers stop here.
// Everything below is reachable from a proc, so that it moves with the
// scripts into a sandbox process.
//
// Memory is checked before each command, with the buffers it will fill
// (shell_buffers.go: a command substitution's output, printf's, a word's
// copies of its variables). What it cannot see: what other expansions
// make before the next check ("$@" named a thousand times, a command
// substitution's output held while the next one in the same word runs);
// nor are
// the goroutines the interpreter starts for a pipeline counted as
// processes (a pipeline waits for its sides, so a script runs a bounded
// number of them). The sandbox process's own limits (its cgroup) are the
// wall for those.

// DefaultPodPidsLimit is how many processes (see limits.fork) a
// container may have running at once when Config.PodPidsLimit is 0.
// The kubelet's podPidsLimit defaults to -1, unlimited, and leaves the
// bound to the kernel's pid_max; the mock's processes are goroutines of
// one process, so it needs a bound of its own: 1024 is far above what a
// pod's scripts run and far below what hurts the runtime.
const DefaultPodPidsLimit = 1024

// DefaultContainerMemory is the memory limit of a container whose config
// sets none, when the runtime is not told the node's memory
// (Config.MemoryCapacity). On a real node such a container is bounded by
// the node's memory; here nothing but the runtime's own process would
// bound it: the default keeps one container from taking the node (and
// every other container) down with it.
const DefaultContainerMemory = 512 << 20

// ReasonOOMKilled is the reason of a container killed because it went over
// its memory limit (exit code 137), as containerd reports it.
const ReasonOOMKilled = "OOMKilled"

// MaxStackFrames bounds how deep a script may nest (function calls, eval,
// source, sh -c within sh -c), counted in Go stack frames of the script's
// goroutine when a command starts. One shell function level takes about
// eight frames and a nested sh -c about twenty, so 10,000 frames is about
// 1,200 levels of recursion: no real script goes near it (bash scripts
// rarely nest beyond a few dozen), and the Go stack is then a few MB, far
// from Go's fatal 1 GB. Without the bound, `f(){ f; }; f` ends the
// runtime's process with a stack overflow, which no recover catches.
const MaxStackFrames = 10000

// ErrForkFailed is what a shell prints when fork fails.
const ErrForkFailed = "sh: fork: retry: Resource temporarily unavailable"

// Limits are a container's: its pids.max and memory.max, and what its
// processes use now. The container's main script and its execs share one
// (they are in procTable).
type Limits struct {
	PidsMax int64        // < 0: unlimited; 0: DefaultPodPidsLimit
	memMax  atomic.Int64 // 0: DefaultContainerMemory; SetMemoryLimit changes it while scripts run

	Pids     atomic.Int64 // the processes running: scripts, utilities, background jobs
	PidsPeak atomic.Int64 // the most that ran at once, as pids.peak
	stress   atomic.Int64 // the bytes stress holds
	vars     atomic.Int64 // the shell variables of the last charge, as the stats report them
	files    atomic.Int64 // bytes written to the writable layer since it was last measured, plus that measure
	Peak     atomic.Int64 // the highest usage seen, as memory.peak

	once      sync.Once
	oomCtx    context.Context // cancelled when the container is OOM-killed
	oomKill   context.CancelFunc
	oomKilled atomic.Bool
}

// SetLimits sets the container's limits: pids (-1: unlimited, 0: the
// default) and memory bytes (<= 0: the default).
func (l *Limits) SetLimits(pids, memory int64) {
	l.PidsMax = pids
	l.memMax.Store(memory)
}

// SetMemoryLimit changes the memory limit of a container whose scripts
// may be running (UpdateContainerResources): their next check holds them
// to it.
func (l *Limits) SetMemoryLimit(memory int64) { l.memMax.Store(memory) }

func (l *Limits) MemoryMax() int64 {
	if m := l.memMax.Load(); m > 0 {
		return m
	}
	return DefaultContainerMemory
}

// fork takes a process slot; false when the container has pids.max
// processes already.
func (l *Limits) fork() bool {
	limit := l.PidsMax
	if limit == 0 {
		limit = DefaultPodPidsLimit
	}
	n := l.Pids.Add(1)
	if limit > 0 && n > limit {
		l.Pids.Add(-1)
		return false
	}
	for p := l.PidsPeak.Load(); n > p && !l.PidsPeak.CompareAndSwap(p, n); p = l.PidsPeak.Load() {
	}
	return true
}

// exit gives back a slot taken by fork.
func (l *Limits) exit() { l.Pids.Add(-1) }

// oom is the context the OOM killer cancels.
func (l *Limits) oom() context.Context {
	l.once.Do(func() { l.oomCtx, l.oomKill = context.WithCancel(context.Background()) })
	return l.oomCtx
}

// Killed reports whether the container was OOM-killed.
func (l *Limits) Killed() bool { return l.oomKilled.Load() }

// charge checks the container's memory with vars bytes of the calling
// shell's variables counted; over the limit, it kills the container (every
// script of it: as the kubelet sets memory.oom.group, the kernel kills the
// whole container) and reports it.
func (l *Limits) charge(root fsRoot, vars int64) bool {
	limit := l.MemoryMax()
	if vars > 0 { // a write to a file charges no variables: keep the shell's last
		l.vars.Store(vars)
	}
	use := vars + l.stress.Load() + l.files.Load()
	if use > limit {
		// The files' count only grows between measures: measure them
		// again before killing.
		l.files.Store(root.usage())
		use = vars + l.stress.Load() + l.files.Load()
	}
	for {
		p := l.Peak.Load()
		if use <= p || l.Peak.CompareAndSwap(p, use) {
			break
		}
	}
	if use <= limit {
		return false
	}
	l.oom()
	l.oomKilled.Store(true)
	l.oomKill()
	return true
}

// fsRoot measures a container's writable layer.
type fsRoot interface{ usage() int64 }

// rootUsage is the bytes of the files under the container's root, as a
// memory-backed writable layer (tmpfs) counts them against the container.
type rootUsage struct{ fsys fs.FS }

func (r rootUsage) usage() int64 {
	var n int64
	_ = fs.WalkDir(r.fsys, ".", func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil // what cannot be read counts nothing
	})
	return n
}

// errOOM halts a script whose container was OOM-killed.
var errOOM = errors.New("killed: out of memory")

// varsSize is the bytes of a shell's variables, names and values.
func varsSize(hc interp.HandlerContext) int64 {
	var n int64
	hc.Env.Each(func(name string, vr expand.Variable) bool {
		n += int64(len(name) + len(vr.Str))
		for _, s := range vr.List {
			n += int64(len(s))
		}
		for k, v := range vr.Map {
			n += int64(len(k) + len(v))
		}
		return true
	})
	return n
}

// checkLimits runs before each command of args (proc.call): it refuses
// to nest deeper than maxStackFrames and enforces the container's memory
// limit, counting the buffers the command writes to and will fill
// (shell_buffers.go).
func (p *proc) checkLimits(ctx context.Context, args []string) error {
	// Counting frames costs a step per frame, a few microseconds for a
	// script's usual depth, at every command: counting at one command in
	// N only would miss a chain of nested sh, each of which runs a single
	// command, and background jobs of the same shell could make a
	// recursion skip the counted ones.
	var pc [1]uintptr
	if runtime.Callers(MaxStackFrames, pc[:]) != 0 {
		return fmt.Errorf("maximum nesting depth (%d stack frames) exceeded", MaxStackFrames)
	}
	hc := interp.HandlerCtx(ctx)
	if p.running.Killed() || p.running.charge(p.rootUsage(), varsSize(hc)+p.defs.size()+predictedOutput(hc, args)) {
		return errOOM // before the OOM context reaches this script (it runs its AfterFuncs on goroutines of their own)
	}
	return nil
}

// rootUsage measures the writable layer only: the mounts are volumes,
// which the container's memory does not count.
func (p *proc) rootUsage() fsRoot { return rootUsage{p.fs.Root.FS()} }

// meteredFile counts the bytes written to a file of the writable layer
// against the container's memory.
type meteredFile struct {
	io.ReadWriteCloser
	p *proc
}

func (f meteredFile) Write(b []byte) (int, error) {
	f.p.running.files.Add(int64(len(b)))
	if f.p.running.charge(f.p.rootUsage(), 0) {
		return 0, errOOM
	}
	return f.ReadWriteCloser.Write(b)
}

// bindOOM returns ctx cancelled as well when the container is OOM-killed.
func (p *proc) bindOOM(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.running.oom(), cancel)
	return ctx, func() { stop(); cancel() }
}

// jobCommand is the command a background statement `X &` becomes (see
// rewriteJobs): `fakeruntime-job 'X' &`. Anyone may run it: it runs its
// argument as one accounted process, which is what `X &` is.
const jobCommand = "fakeruntime-job"

// rewriteJobs rewrites node for the limits, which the interpreter gives
// no hook for:
//
//   - each background statement `X &` (not those inside X: they are
//     rewritten when the job runs) becomes `jobCommand 'X' &`, so that a
//     background job, even one running only builtins, runs in the exec
//     handler, where it takes a process slot and gives it back when it
//     ends;
//   - each statement of assignments only (`x=$x$x`), which runs no call
//     handler, is followed by tickCommand, which does, so that a loop of
//     assignments cannot grow the variables past the memory limit
//     unchecked. The tick keeps $? as the assignment left it;
//   - each loop's body (while, until, for) begins with tickCommand, so
//     that every turn of a loop passes the call handler, where the limits
//     are checked and the CPU limit throttles: a loop of commands that run
//     no handler (`while 2>&1; do 2>&1; done`, function definitions, an
//     empty case) would spin unchecked. The tick keeps $? as the
//     condition left it;
//   - each word that names variables more than once is charged before it
//     expands (rewriteExpansions).
func rewriteJobs(node syntax.Node) {
	rewriteExpansions(node)
	syntax.Walk(node, func(n syntax.Node) bool {
		switch loop := n.(type) {
		case *syntax.WhileClause:
			loop.Do = tickFirst(loop.Do)
		case *syntax.ForClause:
			loop.Do = tickFirst(loop.Do)
		}
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		if st.Background || st.Coprocess || st.Disown {
			backgroundJob(st)
			return false
		}
		call, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(call.Args) > 0 || len(call.Assigns) == 0 || st.Negated {
			return true
		}
		for _, a := range call.Assigns {
			rewriteJobs(a) // command substitutions in the values
		}
		st.Cmd = &syntax.Block{Stmts: []*syntax.Stmt{{Cmd: call}, {Cmd: &syntax.CallExpr{Args: []*syntax.Word{{Parts: []syntax.WordPart{&syntax.Lit{Value: tickCommand}}}}}}}}
		return false
	})
}

// tickCommand follows each statement of assignments only (rewriteJobs);
// it does nothing but let the call handler check the limits.
const tickCommand = "fakeruntime-tick"

// tickFirst is a loop's body with tickCommand first, once: a body that
// begins with it already (a script printed and parsed again) is kept.
func tickFirst(body []*syntax.Stmt) []*syntax.Stmt {
	if len(body) > 0 {
		if call, ok := body[0].Cmd.(*syntax.CallExpr); ok && len(call.Args) == 1 && call.Args[0].Lit() == tickCommand {
			return body
		}
	}
	tick := &syntax.Stmt{Cmd: &syntax.CallExpr{Args: []*syntax.Word{{Parts: []syntax.WordPart{&syntax.Lit{Value: tickCommand}}}}}}
	return append([]*syntax.Stmt{tick}, body...)
}

// backgroundJob rewrites the background statement st (see rewriteJobs).
func backgroundJob(st *syntax.Stmt) {
	inner := *st
	inner.Background, inner.Coprocess, inner.Disown = false, false, false
	inner.Comments = nil
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, &inner); err != nil {
		return // cannot happen for a parsed statement; left as it is
	}
	q, err := syntax.Quote(b.String(), syntax.LangPOSIX)
	if err != nil {
		return // a NUL byte: cannot be in a parsed statement
	}
	// Our own text, two words and no nesting: parsed without the size
	// bound, which a long statement's quoted copy may pass.
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(jobCommand+" "+q), "")
	if err != nil || len(f.Stmts) != 1 {
		return
	}
	st.Cmd, st.Redirs, st.Negated = f.Stmts[0].Cmd, nil, false
	st.Coprocess, st.Disown, st.Background = false, false, true
}

// MaxScriptBytes is the longest script the runtime parses (sh -c, eval,
// source, a trap): 128 KiB, Linux's MAX_ARG_STRLEN, the longest argument,
// so the longest script a real sh -c can get.
const MaxScriptBytes = 128 << 10

// maxParseFrames bounds how deep the parser may take the stack of the
// goroutine it runs on, in Go stack frames counted from the goroutine's
// start. The interpreter's parser recurses on every level of nesting,
// with 6 frames (about 800 bytes) for each "(" and 28 for each "(" of an
// arithmetic expression: 327,680 "(" (320 KiB) overflow a 256 MB stack,
// which no recover catches, and so would 128 KiB of "$((((", whose
// length alone is not refused. 50,000 frames are a few MB of stack: room
// for a thousand levels of any construct from a script nested
// MaxStackFrames deep (no real script nests beyond a few dozen).
const maxParseFrames = 5 * MaxStackFrames

// parseChunk is the most boundedInput hands the parser at once: between
// two reads, it can recurse at most one level per byte (29 frames for an
// arithmetic "("), so the stack may pass maxParseFrames by at most
// parseChunk levels before the next read refuses.
const parseChunk = 256

// errNestedTooDeep is the error of a parse refused by maxParseFrames.
var errNestedTooDeep = errors.New("script nested too deep")

// boundedInput is the only input the runtime's parsers read, whatever
// reaches them: a container's command, an exec, sh -c, eval, . and
// source, trap actions, alias values, array subscripts, the interactive
// shell, here-documents (part of their script). It hands the parser at
// most maxScriptBytes (counted from the last complete command, for the
// interactive shell), and before each read it checks that the parser has
// not recursed past maxParseFrames: a deeply nested input is refused by
// the parser's own depth, not by a second grammar that could miss a
// construct. The parser stops at a read error and returns it.
type boundedInput struct {
	r       io.Reader
	n       int
	printed bool // the runtime's own printing of a bounded script: depth only (printScriptChecked)
}

func (b *boundedInput) Read(p []byte) (int, error) {
	if b.n >= MaxScriptBytes && !b.printed {
		return 0, fmt.Errorf("command too long (more than %d bytes): Argument list too long", MaxScriptBytes)
	}
	if parseTooDeep() {
		return 0, errNestedTooDeep
	}
	p = p[:min(len(p), parseChunk)]
	if !b.printed {
		p = p[:min(len(p), MaxScriptBytes-b.n)]
	}
	n, err := b.r.Read(p)
	b.n += n
	return n, err
}

// parseTooDeep reports whether the calling goroutine is maxParseFrames
// deep: a walk of its frames, as deep as it is and at most that far.
func parseTooDeep() bool {
	var pc [1]uintptr
	return runtime.Callers(maxParseFrames, pc[:]) != 0
}

// parseSource parses src as a POSIX shell script, bounded (boundedInput);
// every parse of a whole script goes through here or parseScript.
func parseSource(src string) (*syntax.File, error) {
	if len(src) > MaxScriptBytes {
		return nil, fmt.Errorf("script too long (more than %d bytes): Argument list too long", MaxScriptBytes)
	}
	return syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(&boundedInput{r: strings.NewReader(src)}, "")
}

// ParseScript parses src as a POSIX shell script (parseSource), with its
// background statements rewritten (rewriteJobs).
func ParseScript(src string) (*syntax.File, error) {
	f, err := parseSource(src)
	if err != nil {
		return nil, err
	}
	rewriteJobs(f)
	return f, nil
}

// checkWords checks that src parses as words within the bounds, as the
// interpreter's alias parses its value (bash).
func checkWords(src string) error {
	if len(src) > MaxScriptBytes {
		return fmt.Errorf("value too long (%d bytes, at most %d): Argument list too long", len(src), MaxScriptBytes)
	}
	for _, err := range syntax.NewParser().WordsSeq(&boundedInput{r: strings.NewReader(src)}) {
		if errors.Is(err, errNestedTooDeep) {
			return err
		}
		if err != nil {
			return nil // a syntax error: the interpreter's own parse reports it, no deeper
		}
	}
	return nil
}

// checkArithmetic checks that src parses as an arithmetic expression
// within the bounds, as the interpreter's unset parses an array subscript.
func checkArithmetic(src string) error {
	if len(src) > MaxScriptBytes {
		return fmt.Errorf("subscript too long (%d bytes, at most %d): Argument list too long", len(src), MaxScriptBytes)
	}
	_, err := syntax.NewParser().Arithmetic(&boundedInput{r: strings.NewReader(src)})
	if errors.Is(err, errNestedTooDeep) {
		return err
	}
	return nil // a syntax error: the interpreter's own parse reports it, no deeper
}

// printScriptChecked is f as source text again, for the interpreter to
// parse as bash (eval, . and source, a trap's action): checked to parse as
// bash within maxParseFrames too, so that the interpreter's own parse of
// it, which no bound reaches, nests no deeper than one that was bounded.
// (Its length is not bounded: printing indents.)
func printScriptChecked(f *syntax.File) (string, error) {
	src := PrintScript(f)
	_, err := syntax.NewParser().Parse(&boundedInput{r: strings.NewReader(src), printed: true}, "")
	if errors.Is(err, errNestedTooDeep) {
		return "", err
	}
	return src, nil // parsed, or a syntax error that the interpreter's parse reports
}

// PrintScript is a parsed script as source text again.
func PrintScript(f *syntax.File) string {
	var b strings.Builder
	_ = syntax.NewPrinter().Print(&b, f) // a strings.Builder never fails
	return b.String()
}

// job runs src as a background job: one process of the container, whose
// slot it holds until src ends however it ends.
func (p *proc) job(ctx context.Context, hc interp.HandlerContext, src string) (err error) {
	if !p.running.fork() {
		fmt.Fprintln(hc.Stderr, ErrForkFailed)
		return interp.NewExitStatus(1)
	}
	defer p.running.exit()
	defer p.running.cpu.start(ctx.Done())() // on the interpreter's goroutine for `&`: counted on its own
	defer func() {
		// A panic here is on the job's goroutine, which only this
		// handler can catch.
		if v := recover(); v != nil {
			msg, _, _ := strings.Cut(fmt.Sprint(v), "\n")
			fmt.Fprintf(hc.Stderr, "sh: internal error: %s\n", msg)
			err = interp.NewExitStatus(2)
		}
	}()
	f, err := ParseScript(src)
	if err == nil {
		src, err = printScriptChecked(f)
	}
	if err != nil {
		fmt.Fprintf(hc.Stderr, "sh: %v\n", err)
		return interp.NewExitStatus(2)
	}
	return hc.Builtin(ctx, []string{"eval", src})
}

// stress is stress(1) as the Kubernetes docs' examples run it
// (polinux/stress): `stress --vm N --vm-bytes SIZE [--vm-hang S]` holds N
// times SIZE bytes, and `stress --cpu N` keeps N workers spinning, until
// killed or, with --timeout D (seconds; suffixes s, m, h, d, y), for D on
// the runtime's clock. The vm hogs only count their bytes against the
// container's memory: nothing is allocated. The cpu hogs really burn: N
// goroutines, each on an OS thread of its own, counted in the
// container's CPU time (shell_usage.go).
func (p *proc) stress(ctx context.Context, hc interp.HandlerContext, args []string) error {
	workers, cpus, size := int64(0), int64(0), int64(256<<20) // stress's default --vm-bytes
	var timeout time.Duration
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := ""
		if i+1 < len(args) {
			val = args[i+1]
		}
		var err error
		switch a {
		case "--vm", "-m":
			workers, err = strconv.ParseInt(val, 10, 64)
			i++
		case "--cpu", "-c":
			cpus, err = strconv.ParseInt(val, 10, 64)
			i++
		case "--vm-bytes":
			size, err = parseStressSize(val)
			i++
		case "--timeout", "-t":
			timeout, err = parseStressTimeout(val)
			i++
		case "--vm-hang", "--vm-stride":
			_, err = strconv.ParseInt(strings.TrimRight(val, "smhdy"), 10, 64)
			i++
		case "--vm-keep", "-v", "--verbose", "-q", "--quiet":
		default:
			err = errors.New("unknown option")
		}
		if err != nil || workers < 0 || workers > 1<<16 || cpus < 0 || cpus > maxStressCPUs || size < 0 {
			fmt.Fprintf(hc.Stderr, "stress: FAIL: [1] (%s) the mock runtime's stress knows only --cpu N, --vm N --vm-bytes SIZE [--vm-hang S], --timeout D\n", a)
			return interp.NewExitStatus(1)
		}
	}
	if workers == 0 && cpus == 0 {
		fmt.Fprintln(hc.Stderr, "stress: FAIL: [1] no hogs requested (the mock runtime's stress knows only --cpu N and --vm N --vm-bytes SIZE)")
		return interp.NewExitStatus(1)
	}
	fmt.Fprintf(hc.Stdout, "stress: info: [1] dispatching hogs: %d cpu, 0 io, %d vm, 0 hdd\n", cpus, workers)
	total := workers * size
	if size != 0 && total/size != workers {
		total = 1 << 62 // overflowed: more than any limit
	}
	p.running.stress.Add(total)
	defer p.running.stress.Add(-total)
	if p.running.charge(p.rootUsage(), varsSize(hc)) {
		return errOOM
	}
	var stop atomic.Bool
	stopped := make(chan struct{})
	var hogs sync.WaitGroup
	for range cpus {
		hogs.Go(func() {
			defer p.running.cpu.start(stopped)()
			for i := 0; !stop.Load(); i++ { // spins: what a cpu hog does
				if i%hogCheck == 0 {
					p.running.cpu.throttle(stopped) // its CPU limit (shell_usage.go)
				}
			}
		})
	}
	defer func() {
		stop.Store(true)
		close(stopped)
		hogs.Wait()
	}()
	var expired <-chan time.Time
	if timeout > 0 {
		timer := p.clock.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C()
	}
	defer p.running.cpu.idle()() // the parent waits, as stress's does
	// PID 1 ignores SIGTERM without a handler: stress has none.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		fmt.Fprintf(hc.Stdout, "stress: info: [1] successful run completed in %ds\n", int64(timeout/time.Second))
		return nil
	}
}

// hogCheck is how many turns of its spin loop a cpu hog runs between two
// checks of its container's CPU limit: a few microseconds of spinning,
// so a check (a clock read and a lock) costs it a few per cent.
const hogCheck = 1 << 14

// maxStressCPUs bounds stress --cpu: each hog is a thread that burns a
// core, so more than a few dozen only slow down every other container.
const maxStressCPUs = 64

// parseStressTimeout reads stress's --timeout: seconds, or a number with
// a suffix s, m, h, d or y.
func parseStressTimeout(s string) (time.Duration, error) {
	s, unit := timeUnit(s, true)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > int64(maxSleep/unit) {
		return 0, fmt.Errorf("invalid timeout %q", s)
	}
	return time.Duration(v) * unit, nil
}

// parseStressSize reads stress's --vm-bytes: a number with an optional
// suffix B, K, M or G (powers of 1024, either case).
func parseStressSize(s string) (int64, error) {
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'b', 'B':
			s = s[:n-1]
		case 'k', 'K':
			s, mult = s[:n-1], 1<<10
		case 'm', 'M':
			s, mult = s[:n-1], 1<<20
		case 'g', 'G':
			s, mult = s[:n-1], 1<<30
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return v * mult, nil
}

// agnhostStress is agnhost's stress subcommand, the memory hog of the
// Kubernetes e2e node tests' eviction pods:
//
//	agnhost stress --mem-alloc-size 12Mi --mem-alloc-sleep 10s --mem-total 1Gi
//
// takes --mem-alloc-size more memory (default 4Ki), then waits
// --mem-alloc-sleep (default 1ms, on the runtime's clock), until one more
// step would pass --mem-total (default 0), and holds it all until the
// container is stopped: its working set grows step by step. The sizes are
// quantities (12Mi, 100M, 1073741824). As stress --vm, it counts its bytes
// against the container's memory (it is OOM-killed past the limit), it
// does not allocate them; and it burns no CPU: --cpus is refused (stress
// --cpu N burns). Like the Go program it is, it exits on SIGTERM.
func (p *proc) agnhostStress(ctx context.Context, hc interp.HandlerContext, args []string) error {
	opts := map[string]string{"mem-total": "0", "mem-alloc-size": "4Ki", "mem-alloc-sleep": "1ms", "cpus": "0"}
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if _, known := opts[name]; !known || !strings.HasPrefix(args[i], "-") {
			fmt.Fprintf(hc.Stderr, "Error: unknown flag: %s (the mock's agnhost stress knows --mem-total, --mem-alloc-size, --mem-alloc-sleep)\n", args[i])
			return interp.NewExitStatus(1)
		}
		if !hasVal {
			if i+1 >= len(args) {
				fmt.Fprintf(hc.Stderr, "Error: flag needs an argument: %s\n", args[i])
				return interp.NewExitStatus(1)
			}
			i++
			val = args[i]
		}
		opts[name] = val
	}
	total, err1 := parseQuantity(opts["mem-total"])
	step, err2 := parseQuantity(opts["mem-alloc-size"])
	pause, err3 := time.ParseDuration(opts["mem-alloc-sleep"])
	if err := errors.Join(err1, err2, err3); err != nil || pause < 0 {
		fmt.Fprintf(hc.Stderr, "Error: invalid argument: %v\n", err)
		return interp.NewExitStatus(1)
	}
	if opts["cpus"] != "0" {
		fmt.Fprintln(hc.Stderr, "Error: the mock's agnhost stress burns no CPU (--cpus): use stress --cpu N")
		return interp.NewExitStatus(1)
	}
	logf := func(format string, a ...any) { // klog's header, as agnhost logs
		fmt.Fprintf(hc.Stderr, "I%s       1 stress.go] %s\n", p.clock.Now().UTC().Format("0102 15:04:05.000000"), fmt.Sprintf(format, a...))
	}
	logf("Allocating %q memory, in %q chunks, with a %v sleep between allocations", opts["mem-total"], opts["mem-alloc-size"], pause)
	var held int64
	defer func() { p.running.stress.Add(-held) }()
	defer p.running.cpu.idle()() // it sleeps between steps, then waits
	wait := func(d time.Duration) error {
		var expired <-chan time.Time
		if d >= 0 {
			timer := p.clock.NewTimer(d)
			defer timer.Stop()
			expired = timer.C()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.term:
			return interp.NewExitStatus(ExitCodeSIGTERM)
		case <-expired:
			return nil
		}
	}
	for n := step; n > 0 && held+n <= total; {
		p.running.stress.Add(n)
		held += n
		if p.running.charge(p.rootUsage(), varsSize(hc)) {
			return errOOM
		}
		if err := wait(pause); err != nil {
			return err
		}
	}
	logf("Allocated %q memory", opts["mem-total"])
	return wait(-1) // select {}: until stopped
}

// parseQuantity parses a quantity of bytes as agnhost's flags take one
// (resource.Quantity's forms: "100Mi", "1G", "1.5Gi", "512", "1e3"),
// rounded up to a whole byte.
func parseQuantity(s string) (int64, error) {
	num, mult := s, 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || strings.ContainsAny(num, "xXpPnNiI_") {
		return 0, fmt.Errorf("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': %q", s)
	}
	v := math.Ceil(f * mult)
	if v < 0 || v > math.MaxInt64/2 {
		return 0, fmt.Errorf("quantity %q is out of range", s)
	}
	return int64(v), nil
}
