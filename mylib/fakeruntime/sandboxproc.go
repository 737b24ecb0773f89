package fakeruntime

// The sandbox processes: when the runtime runs as root on the real clock,
// container scripts do not run in the runtime's own process. Each pod
// sandbox's run in a child process of its own, the sandboxproc package's
// small binary (sandboxproc_binary.go; as containerd starts a shim per
// pod), which the kernel walls in before it reads a single script:
//
//	layer                                   what it stops
//	only its stdio and the runtime's socket  a descriptor inherited without close-on-exec
//	new mount, PID, IPC and UTS namespaces  seeing or signalling the host's processes ($$ is 1, as in a container)
//	pivot_root into a tmpfs of its own,     opening any host file or another pod's, even through an interpreter
//	the host's root detached                bug (its temporary files, PATH lookups, ~user, pwd -P land inside)
//	its pod's files only, bound by the      reaching any file but its own pod's containers' roots and mounts
//	runtime at each container's first run   (/<id>/rootfs, /.mounts/<id>/<i>: nosuid, nodev, noexec, read-only
//	                                        when the mount is; each a clone of what the runtime pinned at
//	                                        CreateContainer; os.Root each; sandboxproc_pod.go)
//	a user namespace of its own: its root   its capability counting on the host's files (open_by_handle_at on
//	no one of the host's (the root stand-   the host's filesystem is refused); its mounts are idmapped with it,
//	in), its pod's user itself              so root's files there are its root's (sandboxproc_pod.go)
//	a uid and gid of its own, no groups,    every privilege of root but reading any file of its namespace's
//	(SandboxUIDBase+, sandboxproc_uid.go),  (CAP_DAC_READ_SEARCH: a container's root reads its 0400 Secret),
//	on every thread at once                 and signalling, tracing or writing as another pod's process; any
//	                                        other local user signalling it
//	no_new_privs                            gaining privileges back through exec
//	a seccomp filter (sandboxproc/seccomp.go) open_by_handle_at, new user namespaces, mounts, keys, bpf, ptrace…
//	rlimits (core 0, open files)            core dumps on the host; a runaway of file descriptors
//	its pod's cgroup (<CgroupParent>/<id>)  more memory, CPU and processes than the pod's limits (the kernel's
//	                                        OOM kill is that pod's containers' OOMKilled; sandboxproc_cgroup.go)
//	the pod network's namespace only        reaching any host address but the pod network's gateway
//	started from a binary opened once       a binary rebuilt since the runtime started becoming a sandbox
//	(a descriptor, its name removed)
//
// The runtime keeps every record (the CRI state machine, the logs, the
// clock) and a map from sandbox ID to its process (started at
// RunPodSandbox, and again by a run after it died; ended at
// StopPodSandbox; its user and cgroup given back at RemovePodSandbox); a sandbox process only runs scripts. They
// talk over a unix socket pair: the runtime sends "run this script in that
// container, with these pipes as its stdin, stdout and stderr" (the pipes
// travel as file descriptors, SCM_RIGHTS), "SIGTERM", "SIGKILL", "fail",
// "what do your containers use"; the sandbox process answers "this run
// exited with this code" (with what its container used until then) and
// the containers' figures (CPU time, memory, processes, network bytes:
// shell_usage.go), a few hundred containers a message. If a pod's
// sandbox process dies, every container it ran has exited (137, reason
// Error; OOMKilled when its cgroup counts an OOM kill), as containerd
// reports the containers of a shim that died, and no other pod's; the
// next start starts a new sandbox process, and the kubelet restarts the
// containers by their restartPolicy.
//
// What a process per pod costs (BenchmarkSandboxBurst, BenchmarkTickers,
// on 2 cores): a Go process each, from the sandboxproc package's binary,
// which links the interpreter and none of the kubelet's packages: about
// 1.6 MiB of its own (proportional set size; its resident size, some
// 12 MiB, counts the binary's text, which the processes share), some
// 20 ms to start one, and a burst of 100 pods in 0.6 s; an idle pod's
// process costs a fraction of a millisecond of CPU a second. Started from
// a binary that embeds the whole runtime (the fallback, and what every
// sandbox was before), a process took 5.3 MiB (34 MiB resident), 30 ms,
// and the burst 2.3 s: every package initializer of that binary ran in
// each pod's process.
//
// A runtime on a fake clock (unit tests) or not root keeps the scripts in
// its own process: a clock cannot cross a process boundary, and without
// root the runtime has no privileges to give away.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// Isolation says where container scripts run.
type Isolation int

const (
	// IsolationAuto (the default) runs them in the sandbox process when the
	// runtime runs as root on the real clock, else in-process.
	IsolationAuto Isolation = iota
	// IsolationInProcess always runs them in the runtime's own process.
	IsolationInProcess
)

// useSandboxProcess says whether a runtime configured so runs its scripts
// in the sandbox process.
func useSandboxProcess(iso Isolation, clk clock.Clock) bool {
	if iso != IsolationAuto || os.Geteuid() != 0 {
		return false
	}
	switch clk.(type) {
	case clock.RealClock, *clock.RealClock:
		return true
	}
	return false
}

// runSpec is a run as the runtime holds it: what the sandbox process
// reads, and what stays in the runtime: the pod sandbox whose process
// runs it, and what the runtime binds into that process's root at the
// container's first run there (sandboxproc_pod.go).
type runSpec struct {
	sandboxproc.RunSpec
	pod    string
	rootfs string                 // the container's rootfs on the host
	pinned []*sandboxproc.FsMount // the container's mounts as the runtime pinned them
}

// remoteRun is a script running in the sandbox process.
type remoteRun struct {
	child  *sandboxChild
	id     string
	exited chan struct{} // closed once code and reason are set
	code   int
	reason string
	usage  sandboxproc.ScriptUsage // its container's, when it ended
	copies sync.WaitGroup          // the copies of its stdout and stderr
}

// Sigterm asks the sandbox process to deliver SIGTERM to the run.
func (r *remoteRun) Sigterm() bool {
	r.child.send(sandboxproc.RunSpec{Op: sandboxproc.OpTerm, ID: r.id}, nil)
	return true
}

// kill asks the sandbox process to end the run now (SIGKILL).
func (r *remoteRun) kill() {
	r.child.send(sandboxproc.RunSpec{Op: sandboxproc.OpKill, ID: r.id}, nil)
}

// wait returns the run's exit once it ended and its output is all copied.
func (r *remoteRun) wait() (int, string) {
	<-r.exited
	r.copies.Wait()
	return r.code, r.reason
}

// start runs spec in its pod's sandbox process (starting one if none
// runs), with stdin (may be nil) copied into a pipe, and stdout and stderr
// out of one: one pipe keeps the order of what the script wrote to each
// (see outputFrame).
func (s *sandboxProcess) start(spec runSpec, stdin io.Reader, stdout, stderr io.Writer) (*remoteRun, error) {
	child, err := s.running(spec)
	if err != nil {
		return nil, err
	}
	if child.cgroup != nil {
		// The pod's cgroup has its cpu.max: the kernel throttles the
		// process, the interpreter need not (the CPU limit comes only to a
		// process in no cgroup: sandboxproc's shell_usage.go).
		spec.Limits.CPUQuota, spec.Limits.CPUPeriod = 0, 0
	}
	spec.Op = sandboxproc.OpRun
	spec.Stdin = stdin != nil
	var theirs []*os.File
	var stdinW *os.File
	if stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		theirs, stdinW = append(theirs, r), w
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		sandboxproc.CloseFiles(theirs)
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, err
	}
	theirs = append(theirs, outW)
	run := &remoteRun{child: child, id: spec.ID, exited: make(chan struct{})}
	child.mu.Lock()
	if child.dead {
		child.mu.Unlock()
		sandboxproc.CloseFiles(append(theirs, outR, stdinW))
		return nil, errors.New("the sandbox process died")
	}
	child.runs[spec.ID] = run
	child.mu.Unlock()
	err = child.send(spec.RunSpec, theirs)
	sandboxproc.CloseFiles(theirs) // the sandbox process has its own copies now
	if err != nil {
		// It died under us, or the request did not fit in one message (an
		// environment of megabytes): the run never started.
		sandboxproc.CloseFiles([]*os.File{outR, stdinW})
		child.mu.Lock()
		delete(child.runs, spec.ID)
		child.mu.Unlock()
		return nil, fmt.Errorf("sandbox process: %w", err)
	}
	if stdinW != nil {
		go func() {
			_, _ = io.Copy(stdinW, stdin) // ends when the script stops reading or stdin ends
			stdinW.Close()
		}()
	}
	consumed := func(int64) {}
	if c, ok := stdin.(interface{ stdinConsumed(int64) }); ok {
		consumed = c.stdinConsumed
	}
	run.copies.Go(func() {
		readFrames(outR, stdout, stderr, consumed) // until the sandbox process closes its end
		outR.Close()
	})
	return run, nil
}

// fault makes container id's servers, in pod's sandbox process, fail (on)
// or recover.
func (s *sandboxProcess) fault(pod, id string, on bool) {
	if p := s.lookup(pod); p != nil {
		if child := p.live(); child != nil {
			child.send(sandboxproc.RunSpec{Op: sandboxproc.OpFault, Container: id, Fault: on}, nil)
		}
	}
}

// update gives container id, in pod's sandbox process, new memory and
// CPU limits (the CPU limit only where no pod cgroup enforces it, as
// start). A sandbox process that is gone has no running container to
// update, as containerd ignores a task that has exited.
func (s *sandboxProcess) update(pod, id string, limits sandboxproc.RunLimits) {
	if p := s.lookup(pod); p != nil {
		if child := p.live(); child != nil {
			if child.cgroup != nil {
				limits.CPUQuota, limits.CPUPeriod = 0, 0
			}
			_ = child.send(sandboxproc.RunSpec{Op: sandboxproc.OpUpdate, Container: id, Limits: limits}, nil) // fails only once it died
		}
	}
}

// close ends every pod's sandbox process and gives back their users and
// cgroups. The sandbox binary stays open: every runtime of this process
// starts from it (sandboxproc_binary.go).
func (s *sandboxProcess) close() {
	s.mu.Lock()
	pods := s.pods
	s.pods = map[string]*podProcess{}
	s.mu.Unlock()
	for _, p := range pods {
		p.remove()
	}
}

// running returns the live sandbox process of spec's pod, starting one
// if needed, with spec's container bound into its root.
func (s *sandboxProcess) running(spec runSpec) (*sandboxChild, error) {
	p, err := s.pod(spec.pod, "")
	if err != nil {
		return nil, fmt.Errorf("sandbox process: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed {
		return nil, errors.New("sandbox process: the pod sandbox is removed")
	}
	if p.child == nil || p.child.isDead() {
		child, err := s.startChild(p)
		if err != nil {
			return nil, fmt.Errorf("sandbox process: %w", err)
		}
		p.child = child
	}
	if spec.rootfs != "" {
		if err := p.child.bind(spec); err != nil {
			return nil, fmt.Errorf("sandbox process: %w", err)
		}
	}
	return p.child, nil
}

// usageTimeout bounds the wait for the sandbox process's figures: it
// answers them between two requests, at once.
const usageTimeout = 10 * time.Second

// usage asks every pod's sandbox process what its containers use now,
// by container ID. No sandbox process: none.
func (s *sandboxProcess) usage(ctx context.Context) (map[string]sandboxproc.ScriptUsage, error) {
	s.mu.Lock()
	var children []*sandboxChild
	for _, p := range s.pods {
		if child := p.live(); child != nil {
			children = append(children, child)
		}
	}
	s.mu.Unlock()
	out := map[string]sandboxproc.ScriptUsage{}
	type answer struct {
		got map[string]sandboxproc.ScriptUsage
		err error
	}
	answers := make(chan answer, len(children))
	for _, child := range children {
		go func() {
			got, err := child.usage(ctx)
			answers <- answer{got, err}
		}()
	}
	var errs []error
	for range children {
		a := <-answers
		errs = append(errs, a.err)
		for k, v := range a.got {
			out[k] = v
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// adopt gives the user of c's pod's sandbox process c's new root file
// system, and makes the control API's fault switch reach c's servers
// there.
func (s *sandboxProcess) adopt(c *container) error {
	p, err := s.pod(c.sandboxID, "")
	if err != nil {
		return err
	}
	pod, id, uid := c.sandboxID, c.id, p.uid.uid
	c.fault.Notify = func(on bool) { s.fault(pod, id, on) }
	return filepath.Walk(filepath.Join(c.dir, "rootfs"), func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// spec is what the sandbox process needs to run script in c. Caller holds
// r.mu.
func (r *Runtime) spec(c *container, script string, params []string) runSpec {
	ip := ""
	if s := r.sandboxes[c.sandboxID]; s != nil {
		ip = s.ip
	}
	quota, period := c.running.CPUQuota()
	spec := runSpec{RunSpec: sandboxproc.RunSpec{ID: newRunID(), Container: c.id, Script: script, Params: params, Env: c.env,
		WorkDir: c.workDir, Hostname: c.hostname, PodIP: ip, Mounts: c.mapped,
		Limits: sandboxproc.RunLimits{Pids: c.running.PidsMax, Memory: c.running.MemoryMax(), CPUQuota: quota, CPUPeriod: period}, PIDTarget: c.pidTarget, PodPID: c.podPIDNamespace()},
		pod: c.sandboxID}
	if c.dir != "" && c.fs != nil {
		spec.rootfs, spec.pinned = filepath.Join(c.dir, "rootfs"), c.fs.Mounts
	}
	return spec
}

// startInSandbox starts c's main script in the sandbox process. Caller
// holds r.mu.
func (r *Runtime) startInSandbox(c *container, in io.Reader, out, errw io.Writer, stdout, stderr *logStream) error {
	spec := r.spec(c, c.script, c.params)
	spec.Process = c.process
	if c.interactive && in != nil {
		spec.Interactive, spec.Prompt = true, c.prompt()
	}
	if in != nil {
		in = c.io.stdin.readRemotely(in)
	}
	run, err := r.sandbox.start(spec, in, out, errw)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	c.proc, c.cancel, c.done = run, run.kill, done
	go func() {
		code, reason := run.wait()
		run.child.unbind(c.id) // its files leave the sandbox process's root
		c.remote.merge(run.usage)
		stdout.flush()
		stderr.flush()
		r.mu.Lock()
		if c.proc == process(run) && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.exit(r.now(), int32(code))
			if reason != "" {
				c.reason = reason
			}
			r.containerEvent(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, c)
		}
		r.mu.Unlock()
		close(done)
	}()
	return nil
}

// exec runs spec in the sandbox process until it ends or ctx does (then it
// is killed: 137), and returns its exit code. A sandbox process that
// cannot start is said on stderr: 126, as a shell's "cannot execute".
func (s *sandboxProcess) exec(ctx context.Context, spec runSpec, stdin io.Reader, stdout, stderr io.Writer) int {
	run, err := s.start(spec, stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "mock runtime: %v\n", err)
		return 126
	}
	select {
	case <-run.exited:
	case <-ctx.Done():
		run.kill()
	}
	code, _ := run.wait()
	if ctx.Err() != nil {
		return ExitCodeSIGKILL
	}
	return code
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// runIDs numbers the runs of this process.
var runIDs struct {
	sync.Mutex
	n uint64
}

func newRunID() string {
	runIDs.Lock()
	defer runIDs.Unlock()
	runIDs.n++
	return strconv.FormatUint(runIDs.n, 10)
}
