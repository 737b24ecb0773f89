package sandboxproc

// The sandbox process's own side: it walls itself in, then runs the
// scripts the runtime sends (see sandboxproc.go).

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// init turns the runtime's binary into the sandbox process when it was
// started as one: before main, so that no flag, no client and no server of
// the program it is part of ever starts.
func init() {
	if v, ok := os.LookupEnv(SandboxEnv); ok {
		os.Exit(sandboxMain(v))
	}
}

// sandboxMain is the sandbox process: it returns its exit code. Started
// by the runtime as the root of a user namespace of its own (its root is
// no one of the host's: the root stand-in), it walls itself in, gives
// root up for its pod's user (becomeItsUser), checks what it became, and
// serves the runtime.
func sandboxMain(config string) int {
	nameItself()
	var cfg SandboxConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: config: %v\n", err)
		return 2
	}
	err := closeInherited()
	if err == nil && cfg.RootUID != 0 {
		err = checkUserNamespace(cfg)
	}
	if err == nil {
		err = wallIn(cfg)
	}
	kept := uint32(1) << keptCapability
	if err == nil && cfg.RootUID != 0 {
		err = becomeItsUser(cfg.UID)
	}
	if err == nil && cfg.RootUID == 0 || errors.Is(err, unix.ENOTSUP) {
		// Without a user namespace of its own, a capability it kept
		// would be one in the host's (open_by_handle_at opens any file
		// of a filesystem it can name); and a binary linked with cgo
		// cannot change all its threads at once (ENOTSUP). Either way it
		// gives root up, all of it (Go sets the user of every thread).
		err, kept = giveRootUp(cfg.UID), 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		return 2
	}
	if err := checkWalls(cfg.UID, kept); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		return 2
	}
	// The last wall, before a script runs: the kernel refuses what no
	// pod's command needs (seccomp.go).
	if !seccompOff {
		if err := installSeccomp(); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
			return 2
		}
	}
	os.Unsetenv(SandboxEnv) // nothing of it reaches a script
	// A script's runaway recursion is an error in its container (the
	// interpreter bounds it); this is the process's last line.
	debug.SetMaxStack(256 << 20)
	f := os.NewFile(3, "runtime")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: the runtime's socket: %v\n", err)
		return 2
	}
	conn := fc.(*net.UnixConn)
	s := &SandboxServer{Conn: conn, Runs: map[string]*ChildRun{}, Containers: map[string]*ChildContainer{}, noNet: cfg.NoNet}
	s.exit(ReadyID, 0, "")
	s.Serve()
	return 0
}

// wallIn puts the process behind its walls, all of which need its root:
// the mount namespace and its new root, the rlimits.
func wallIn(cfg SandboxConfig) error {
	if cfg.UID < SandboxUIDBase || cfg.UID >= SandboxUIDBase+SandboxUIDCount {
		return fmt.Errorf("uid %d is not one of the sandbox users", cfg.UID)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mounts: %w", err)
	}
	// Its root: an empty tmpfs of its own (the host sees nothing of it:
	// the mount is in this namespace only), root's, into which the runtime
	// binds its pod's containers' files as they first run here
	// (sandboxproc_pod.go). The host's root goes: pivot_root, and the old
	// root detached, so that no file of the host, no /proc, nothing of
	// another pod is reachable by any path or any "..".
	if err := unix.Mount("tmpfs", cfg.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0711,size=1m,nr_inodes=16384"); err != nil {
		return fmt.Errorf("root: %w", err)
	}
	old := filepath.Join(cfg.Dir, ".old")
	if err := os.Mkdir(old, 0o700); err != nil {
		return fmt.Errorf("root: %w", err)
	}
	if err := unix.PivotRoot(cfg.Dir, old); err != nil {
		return fmt.Errorf("pivot_root %s: %w", cfg.Dir, err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("the host's root: %w", err)
	}
	if err := os.Remove("/.old"); err != nil {
		return fmt.Errorf("the host's root: %w", err)
	}
	if err := os.Mkdir("/"+MountsDir, 0o711); err != nil {
		return err
	}
	// No core dumps on the host; open files capped (each running script
	// holds a few: its root and its stdio), hard limit included, so that
	// its user cannot raise it again.
	for _, l := range []struct {
		res int
		val uint64
	}{
		{unix.RLIMIT_CORE, 0},
		{unix.RLIMIT_NOFILE, 1 << 15},
	} {
		var cur unix.Rlimit
		if err := unix.Getrlimit(l.res, &cur); err != nil {
			return fmt.Errorf("rlimit %d: %w", l.res, err)
		}
		v := min(l.val, cur.Max)
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("rlimit %d: %w", l.res, err)
		}
	}
	return nil
}

// checkUserNamespace checks, while the host's /proc is still there, that
// the process is the root of a user namespace that maps its root to the
// root stand-in and its pod's user to itself, and no other id (IDMap).
func checkUserNamespace(cfg SandboxConfig) error {
	want := IDMap(cfg.RootUID, cfg.UID)
	for _, f := range []string{"/proc/self/uid_map", "/proc/self/gid_map"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("its user namespace: %w", err)
		}
		if got := strings.Join(strings.Fields(string(b)), " "); got != strings.Join(strings.Fields(want), " ") {
			return fmt.Errorf("its user namespace: %s is %q, want %q", f, got, want)
		}
	}
	if uid, gid := os.Getuid(), os.Getgid(); uid != 0 || gid != 0 {
		return fmt.Errorf("its user namespace: it runs as %d:%d, not as its root", uid, gid)
	}
	return nil
}

// closeInherited closes every descriptor the process was started with
// but its stdio and the runtime's socket (fd 3): one the runtime
// inherited without close-on-exec (a shell's 7</etc) would pass through
// pivot_root. Those are the ones without FD_CLOEXEC: Go opens all of its
// own with it, and its runtime holds some from its start (the cgroup's
// cpu.max, which it reads again later), so close_range(4, ~0) would
// close them under it.
func closeInherited() error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("its descriptors: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("its descriptors: %w", err)
	}
	for _, n := range names {
		fd, _ := strconv.Atoi(n)
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fd > 3 && err == nil && flags&unix.FD_CLOEXEC == 0 {
			if err := unix.Close(fd); err != nil {
				return fmt.Errorf("close %d: %w", fd, err)
			}
		}
	}
	return nil
}

// keptCapability is the one privilege of root the sandbox process keeps:
// reading any file (CAP_DAC_READ_SEARCH), as a container's root reads a
// Secret file of mode 0400 that the kubelet wrote as root (defaultMode:
// 0400). It holds in the process's own user namespace alone: over the
// files whose owner and group that namespace maps (its pod's user's, and
// root's on the mounts the runtime idmapped for it), and nowhere in the
// host's (open_by_handle_at, which needs it there, is refused). It writes
// only where the modes let its user write.
const keptCapability = unix.CAP_DAC_READ_SEARCH

// becomeItsUser gives root up for the pod's user, keeping keptCapability
// alone. A process's user and capabilities belong to each of its threads,
// and Go runs many: each step is made on every thread at once
// (syscall.AllThreadsSyscall; ENOTSUP in a binary linked with cgo). The
// capabilities' bounding set down to the one kept, no groups, the user's
// group and user (keeping the capabilities across, PR_SET_KEEPCAPS), then
// of those only the one kept.
func becomeItsUser(uid int) error {
	all := func(what string, trap, a1, a2, a3 uintptr) error {
		if _, _, e := syscall.AllThreadsSyscall(trap, a1, a2, a3); e != 0 {
			return fmt.Errorf("%s: %w", what, e)
		}
		return nil
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if c == keptCapability {
			continue
		}
		if err := all("bounding set", unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return err // EINVAL: a capability this kernel does not know
		}
	}
	one := uint32(1) << keptCapability
	header := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{{Effective: one, Permitted: one}}
	for _, step := range []struct {
		what       string
		trap       uintptr
		a1, a2, a3 uintptr
	}{
		{"setgroups", unix.SYS_SETGROUPS, 0, 0, 0},
		{"setresgid", unix.SYS_SETRESGID, uintptr(uid), uintptr(uid), uintptr(uid)},
		{"keepcaps", unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1, 0},
		{"setresuid", unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)},
		{"capset", unix.SYS_CAPSET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0},
		{"keepcaps", unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 0, 0},
	} {
		if err := all(step.what, step.trap, step.a1, step.a2, step.a3); err != nil {
			return err
		}
	}
	runtime.KeepAlive(&header)
	runtime.KeepAlive(&data)
	return nil
}

// nameItself sets the name `ps -e` and `top` show (the kernel keeps its first
// 15 bytes: mykubelet-sandb). A program started from a descriptor, as the
// runtime starts it (/proc/self/fd/N), is otherwise named by the
// descriptor's number. init runs on the main thread, whose name is the
// process's.
func nameItself() {
	name := []byte("mykubelet-sandbox\x00")
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
}

// giveRootUp makes every thread of the process the pod's user, with no
// groups and no capability.
func giveRootUp(uid int) error {
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(uid); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	return nil
}

// LinkedStatically reports whether the ELF binary f names no program
// interpreter (the dynamic loader), as a Go binary built without cgo.
// Read through ReadAt: f's offset is left alone.
func LinkedStatically(f *os.File) bool {
	e, err := elf.NewFile(f)
	if err != nil {
		return false
	}
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// checkWalls is the sandbox process's look at itself before it serves:
// the pod's user, in every one of its ids, no groups, and no capability
// but the ones kept (a mask of the first 32), effective and permitted;
// anything else (a step of giving root up that did not take) refuses to
// serve.
func checkWalls(uid int, kept uint32) error {
	ruid, euid, suid := unix.Getresuid()
	rgid, egid, sgid := unix.Getresgid()
	if uid < SandboxUIDBase || uid >= SandboxUIDBase+SandboxUIDCount || ruid != uid || euid != uid || suid != uid || rgid != uid || egid != uid || sgid != uid {
		return fmt.Errorf("walls: runs as %d/%d/%d (groups %d/%d/%d), not as the pod's user %d", ruid, euid, suid, rgid, egid, sgid, uid)
	}
	if groups, err := unix.Getgroups(); err != nil || len(groups) != 0 {
		return fmt.Errorf("walls: groups %v (%v), want none", groups, err)
	}
	var data [2]unix.CapUserData
	if err := unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		return fmt.Errorf("walls: capget: %w", err)
	}
	if data[0].Effective != kept || data[0].Permitted != kept || data[1] != (unix.CapUserData{}) {
		return fmt.Errorf("walls: capabilities %+v, want %#x alone", data, kept)
	}
	return nil
}

// SandboxServer runs the runtime's requests.
type SandboxServer struct {
	Conn  *net.UnixConn
	noNet bool

	mu         sync.Mutex
	Runs       map[string]*ChildRun
	Containers map[string]*ChildContainer
	pods       map[string]*podPIDNamespace // the pods' shared PID namespaces, by sandbox
	sent       sync.Mutex
}

// ChildRun is a script running here.
type ChildRun struct {
	p         *proc
	cancel    context.CancelFunc
	container *ChildContainer
}

// ChildContainer is what the runs of one container share.
type ChildContainer struct {
	id      string
	runs    int
	Running ProcTable
	fault   FaultSwitch
	// mounts are the container's mounts, pinned at its first run and held
	// until its last ended: its later runs (execs) use them as they are,
	// never walking a host path again.
	mounts []*FsMount
	pinned bool
	podPID string // the sandbox whose PID namespace it joined
}

// Serve reads requests until the runtime closes its end, then exits.
func (s *SandboxServer) Serve() {
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := s.Conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return // the runtime is gone: so are its containers
		}
		var files []*os.File
		if oobn > 0 {
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				fds, _ := unix.ParseUnixRights(&m)
				for _, fd := range fds {
					files = append(files, os.NewFile(uintptr(fd), "pipe"))
				}
			}
		}
		var spec RunSpec
		if err := json.Unmarshal(buf[:n], &spec); err != nil {
			CloseFiles(files)
			continue
		}
		s.handle(spec, files)
	}
}

func (s *SandboxServer) handle(spec RunSpec, files []*os.File) {
	switch spec.Op {
	case OpRun:
		want := 1
		if spec.Stdin {
			want = 2
		}
		if len(files) != want {
			CloseFiles(files)
			s.exit(spec.ID, 126, "")
			return
		}
		s.run(spec, files) // the run closes them when it ends
		return
	case OpTerm, OpKill:
		s.mu.Lock()
		r := s.Runs[spec.ID]
		s.mu.Unlock()
		if r != nil && spec.Op == OpTerm {
			r.p.Sigterm()
		} else if r != nil {
			r.cancel()
		}
	case OpFault:
		s.mu.Lock()
		c := s.Container(spec.Container)
		s.mu.Unlock()
		c.fault.Set(spec.Fault)
	case OpUsage:
		s.usages(spec.ID)
	case OpUpdate:
		s.mu.Lock()
		// A container with no run here takes its limits with its next run.
		if c := s.Containers[spec.Container]; c != nil && c.runs > 0 {
			c.Running.SetMemoryLimit(spec.Limits.Memory)
			c.Running.SetCPULimit(spec.Limits.CPUQuota, spec.Limits.CPUPeriod)
		}
		s.mu.Unlock()
	}
	CloseFiles(files)
}

// Container returns the shared state of container id. Caller holds mu.
func (s *SandboxServer) Container(id string) *ChildContainer {
	c := s.Containers[id]
	if c == nil {
		c = &ChildContainer{id: id}
		s.Containers[id] = c
	}
	return c
}

// run starts spec's script with files as its stdio.
func (s *SandboxServer) run(spec RunSpec, files []*os.File) {
	var stdin io.Reader
	if spec.Stdin {
		stdin, files = files[0], files[1:]
	}
	var mu sync.Mutex
	stdout, stderr := frameWriter{mu: &mu, f: files[0], stream: 1}, frameWriter{mu: &mu, f: files[0], stream: 2}
	if f, ok := stdin.(*os.File); ok {
		stdin = &stdinReport{f: f, w: frameWriter{mu: &mu, f: files[0], stream: 3}}
	}
	s.mu.Lock()
	c := s.Container(spec.Container)
	view, err := c.openView(spec)
	if err != nil {
		c.runs++
		s.ended(c)
		s.mu.Unlock()
		fmt.Fprintf(stderr, "sh: %v\n", err)
		CloseFiles(files)
		if f, ok := stdin.(*stdinReport); ok {
			f.f.Close()
		}
		s.exit(spec.ID, 126, "")
		return
	}
	if c.runs == 0 {
		c.Running.SetLimits(spec.Limits.Pids, spec.Limits.Memory)
		c.Running.SetCPULimit(spec.Limits.CPUQuota, spec.Limits.CPUPeriod)
		if spec.PIDTarget != "" && spec.PIDTarget != spec.Container {
			c.Running.JoinPIDNamespace(&s.Container(spec.PIDTarget).Running)
		} else if spec.PodPID != "" {
			s.joinPodPIDNamespace(c, spec.PodPID)
		}
	}
	c.runs++
	p := NewProc(RealClock{}, view, spec.Hostname, spec.Env, stdout, stderr, &c.Running)
	p.WorkDir = spec.WorkDir
	p.Process = spec.Process
	p.Net = &ContainerNet{PodIP: spec.PodIP, direct: !s.noNet, NetErr: ErrNoPodNetwork, Fault: &c.fault, Traffic: &c.Running.Traffic}
	if !spec.Interactive {
		p.Stdin = stdin
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.Runs[spec.ID] = &ChildRun{p: p, cancel: cancel, container: c}
	s.mu.Unlock()
	go func() {
		var code int
		if spec.Interactive {
			code = p.Interactive(ctx, stdin, spec.Prompt)
		} else {
			code = p.Run(ctx, spec.Script, spec.Params)
		}
		cancel()
		view.Close()
		CloseFiles(files)
		if f, ok := stdin.(*stdinReport); ok {
			f.f.Close()
		}
		s.mu.Lock()
		delete(s.Runs, spec.ID)
		s.ended(c)
		s.mu.Unlock()
		reason := ""
		if c.Running.Killed() {
			code, reason = ExitCodeSIGKILL, ReasonOOMKilled
		}
		u := c.Running.Usage()
		s.send(RunExit{ID: spec.ID, Code: code, Reason: reason, Usage: &u})
	}()
}

// ended counts a run of c out. Once none is left, the container has
// exited (its main script ended, and an exec needs a running container):
// its pinned mounts are closed, and its record forgotten unless its
// servers' fault is on. Caller holds mu.
func (s *SandboxServer) ended(c *ChildContainer) {
	if c.runs--; c.runs > 0 {
		return
	}
	CloseMounts(c.mounts)
	c.mounts, c.pinned = nil, false
	if on, _ := c.fault.state(); !on {
		delete(s.Containers, c.id)
		s.leavePodPIDNamespace(c)
	}
}

// exit tells the runtime that run id ended.
func (s *SandboxServer) exit(id string, code int, reason string) {
	s.send(RunExit{ID: id, Code: code, Reason: reason})
}

// send writes one message to the runtime.
func (s *SandboxServer) send(e RunExit) {
	b, _ := json.Marshal(e) // plain fields always marshal
	s.sent.Lock()
	defer s.sent.Unlock()
	_, _, _ = s.Conn.WriteMsgUnix(b, nil, nil) // a runtime that is gone reads no exits
}

// usages answers request id with what each of its containers uses now,
// in parts (see usagesPerMessage).
func (s *SandboxServer) usages(id string) {
	s.mu.Lock()
	all := make(map[string]ScriptUsage, len(s.Containers))
	for cid, c := range s.Containers {
		all[cid] = c.Running.Usage()
	}
	s.mu.Unlock()
	part := map[string]ScriptUsage{}
	parts := 1
	for cid, u := range all {
		if len(part) == UsagesPerMessage && parts < MaxUsageParts {
			s.send(RunExit{ID: id, Usages: part, More: true})
			part, parts = map[string]ScriptUsage{}, parts+1
		}
		part[cid] = u
	}
	s.send(RunExit{ID: id, Usages: part})
}

// openView opens the view of a run of c: its root, and its mounts, which
// the first run pins from where the runtime bound them in this process's
// root (/.mounts/<container>/<i>), each the very directory or file the
// runtime pinned at CreateContainer (checked again: the same device and
// inode). Caller holds mu.
func (c *ChildContainer) openView(spec RunSpec) (*ContainerFS, error) {
	if !c.pinned {
		specs := slices.Clone(spec.Mounts)
		for i := range specs {
			specs[i].Rel = strconv.Itoa(i)
		}
		mounts, err := pinMounts(specs, func(MountSpec) string { return BoundMounts(path.Clean("/" + spec.Container)[1:]) })
		if err != nil {
			return nil, err
		}
		c.mounts, c.pinned = mounts, true
	}
	root, err := os.OpenRoot(BoundRootfs(path.Clean("/" + spec.Container)[1:]))
	if err != nil {
		return nil, fmt.Errorf("container root: %w", err)
	}
	v := NewContainerFS(root, c.mounts)
	v.borrowed = true
	return v, nil
}

// stdinReport is a script's stdin in the sandbox process: before each read
// that will wait (nothing in the pipe), it tells the runtime how many bytes
// the script has read so far (a frame of stream 3), so that an attach
// session knows when what it sent has all been read (streaming_attach.go).
type stdinReport struct {
	f    *os.File
	w    frameWriter
	read int64
}

func (s *stdinReport) Read(p []byte) (int, error) {
	if rc, err := s.f.SyscallConn(); err == nil {
		pending := -1
		_ = rc.Control(func(fd uintptr) { pending, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
		if pending == 0 {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], uint64(s.read))
			_, _ = s.w.Write(b[:])
		}
	}
	n, err := s.f.Read(p)
	s.read += int64(n)
	return n, err
}
