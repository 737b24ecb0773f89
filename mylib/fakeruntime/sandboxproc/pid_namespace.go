package sandboxproc

import (
	"path"
	"slices"
	"strings"
	"sync"
)

// A container's processes as ps and pgrep see them. The mock runs no real
// processes; what it lists are its scripts' processes: a container's main
// process, a command run by exec, and each utility a script runs, for as
// long as it runs. Each gets a PID in its PID namespace when it starts,
// the next one in order, as the kernel gives them (the mock never reuses
// one). The container's CRI NamespaceOptions.Pid says which namespace
// that is:
//
//	CONTAINER (the default)      its own: its main process is PID 1
//	POD (shareProcessNamespace)  the pod's, shared by all its containers, whose PID 1 is the
//	                             sandbox's pause process (/pause), as with containerd
//	TARGET (kubectl debug        its target container's (and so the pod's, if the target
//	--target)                    shares the pod's)
//
// NODE (hostPID) is not given: the mock's containers see only their own.
//
// A main process or an exec that is a shell (`sh -c SCRIPT`, a lone `sh`)
// is listed as such, and so is each utility its script runs, as a shell's
// children. One that is a single command is that command: the utility
// itself (`sleep 1000`, `nginx -g daemon off;`). One that runs an image's
// program the mock plays with a script (the pause image's /pause, httpd)
// is listed as that program, and the utilities of its script are not
// listed: they are how the mock plays it, not processes of the image.

// PidNamespace is one PID namespace's processes.
type PidNamespace struct {
	mu    sync.Mutex
	last  int // the last PID given
	procs map[int]PsEntry
}

// PsEntry is one process as ps shows it.
type PsEntry struct {
	pid  int
	user string // "root", or a uid
	comm string // its program's base name, which pgrep matches
	Args string // its command line
}

func newPIDNamespace() *PidNamespace { return &PidNamespace{procs: map[int]PsEntry{}} }

// pauseUID is the pause image's user (its Dockerfile says USER
// 65535:65535), which busybox's ps shows as a number.
const pauseUID = "65535"

// NewPodPIDNamespace returns a pod's shared PID namespace, whose PID 1 is
// the sandbox's pause process.
func NewPodPIDNamespace() *PidNamespace {
	ns := newPIDNamespace()
	ns.enter(pauseUID, []string{"/pause"})
	return ns
}

// enter adds a process running argv and returns its PID.
func (ns *PidNamespace) enter(user string, argv []string) int {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.last++
	ns.procs[ns.last] = PsEntry{pid: ns.last, user: user, comm: path.Base(argv[0]), Args: strings.Join(argv, " ")}
	return ns.last
}

// leave removes the process pid: it exited.
func (ns *PidNamespace) leave(pid int) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	delete(ns.procs, pid)
}

// List returns the processes, by PID.
func (ns *PidNamespace) List() []PsEntry {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	out := make([]PsEntry, 0, len(ns.procs))
	for _, e := range ns.procs {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b PsEntry) int { return a.pid - b.pid })
	return out
}

// pids returns the PIDs of the processes whose program is comm, in order.
func (ns *PidNamespace) pids(comm string) []int {
	var out []int
	for _, e := range ns.List() {
		if e.comm == comm {
			out = append(out, e.pid)
		}
	}
	return out
}

// Namespace returns the PID namespace t's processes run in: its own, made
// on first use, unless it joined another.
func (t *ProcTable) Namespace() *PidNamespace {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pidns == nil {
		t.pidns = newPIDNamespace()
	}
	return t.pidns
}

// JoinPIDNamespace makes t's processes run in target's PID namespace
// (NamespaceMode TARGET).
func (t *ProcTable) JoinPIDNamespace(target *ProcTable) {
	t.UsePIDNamespace(target.Namespace())
}

// UsePIDNamespace makes t's processes run in ns (a pod's, NamespaceMode
// POD). It is called before the container's first process runs.
func (t *ProcTable) UsePIDNamespace(ns *PidNamespace) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pidns = ns
}

// enter adds a process of t running argv, as root, and returns its PID.
func (t *ProcTable) enter(argv []string) int { return t.Namespace().enter("root", argv) }

// leave removes t's process pid.
func (t *ProcTable) leave(pid int) { t.Namespace().leave(pid) }

// Count returns how many processes of t's PID namespace run program name.
func (t *ProcTable) Count(name string) int { return len(t.Namespace().pids(name)) }

// enterProcess lists p as its process command line, if it has one, until
// the returned func is called. A process that is not a shell is quiet: the
// utilities of its script are not listed.
func (p *proc) enterProcess() (leave func()) {
	if len(p.Process) == 0 {
		return func() {}
	}
	if !IsShell(p.Process[0]) {
		p.quiet = true
	}
	pid := p.running.enter(p.Process)
	return func() { p.running.leave(pid) }
}

// ProcessOf returns the command line ps lists a script started for argv
// as: argv if it is a shell's; nil for a single command, which lists
// itself as it runs (the utility or server that it is).
func ProcessOf(argv []string) []string {
	if len(argv) > 0 && IsShell(argv[0]) {
		return slices.Clone(argv)
	}
	return nil
}

// podPIDNamespace is a pod's shared PID namespace in the sandbox process,
// with the number of its containers the process knows: it is forgotten
// with the last.
type podPIDNamespace struct {
	ns         *PidNamespace
	containers int
}

// joinPodPIDNamespace makes c's processes run in the PID namespace of
// sandbox id, made on its first container's first run. Caller holds mu.
func (s *SandboxServer) joinPodPIDNamespace(c *ChildContainer, id string) {
	if s.pods == nil {
		s.pods = map[string]*podPIDNamespace{}
	}
	pod := s.pods[id]
	if pod == nil {
		pod = &podPIDNamespace{ns: NewPodPIDNamespace()}
		s.pods[id] = pod
	}
	pod.containers++
	c.podPID = id
	c.Running.UsePIDNamespace(pod.ns)
}

// leavePodPIDNamespace counts forgotten container c out of its pod's PID
// namespace, if it shares one. Caller holds mu.
func (s *SandboxServer) leavePodPIDNamespace(c *ChildContainer) {
	pod := s.pods[c.podPID]
	if pod == nil {
		return
	}
	if pod.containers--; pod.containers == 0 {
		delete(s.pods, c.podPID)
	}
}
