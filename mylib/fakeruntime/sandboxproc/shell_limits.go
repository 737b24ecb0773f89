package sandboxproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

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
