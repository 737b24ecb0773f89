package fakeruntime

// One sandbox process per pod sandbox: the runtime's side of the map from
// a sandbox ID to its process, the process's user (sandboxproc_uid.go) and
// cgroup (sandboxproc_cgroup.go), and the files of the pod's containers
// the runtime binds into the process's root as they first run there.

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"mykubelet/mylib/fakeruntime/podnet"
	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// sandboxProcess is the runtime's side of the sandbox processes: one per
// pod sandbox, started at RunPodSandbox (and by a run after it died),
// ended at StopPodSandbox (its user and cgroup given back at RemovePodSandbox).
type sandboxProcess struct {
	net *podnet.Network // nil: no pod network

	// exe is the sandbox binary (sandboxproc_binary.go), opened once per
	// runtime process: every sandbox process is started from it, so that
	// a binary rebuilt (or replaced) since is never one.
	exe    *os.File
	exeErr error

	mu   sync.Mutex
	pods map[string]*podProcess // by sandbox ID

	noCgroup sync.Once // the log says once that a pod has no cgroup

	// rootUID is the root stand-in of the sandbox processes' user
	// namespaces (sandboxproc_uid.go); 0 once none can be made.
	rootUID int
}

// noIDMap says once, for every runtime of the process, that a mount
// could not be idmapped.
var noIDMap sync.Once

// podProcess is one pod sandbox's process, its user and its cgroup.
type podProcess struct {
	id           string
	cgroupParent string
	uid          *uidSlot

	mu      sync.Mutex
	child   *sandboxChild // nil until the first run, and after StopPodSandbox
	cgroup  *podCgroup    // made at the first run, when the pod has a CgroupParent
	removed bool          // RemovePodSandbox: no process any more
}

// newSandboxProcess opens the binary of the sandbox processes it will
// start.
func newSandboxProcess(pn *podnet.Network) *sandboxProcess {
	s := &sandboxProcess{net: pn, pods: map[string]*podProcess{}}
	s.exe, s.exeErr = sandboxBinary()
	if s.exeErr == nil {
		s.exeErr = makeSandboxRootDir()
	}
	var err error
	if s.rootUID, err = rootStandIn(); err != nil {
		klog.InfoS(noUserNamespaceMessage, "err", err)
	}
	return s
}

// sandboxRootDir is where each sandbox process mounts its root, a tmpfs
// of its own, in its own mount namespace: the host sees nothing there.
// Its root, no one of the host's, must reach it: the directories to it
// are root's, and others may pass through them, not list or write them.
const sandboxRootDir = "/run/mykubelet/sandbox-root"

// makeSandboxRootDir makes sandboxRootDir, and its parent, so.
func makeSandboxRootDir() error {
	for _, d := range []string{filepath.Dir(sandboxRootDir), sandboxRootDir} {
		if err := os.Mkdir(d, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("the sandbox processes' mount point: %w", err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("the sandbox processes' mount point: %w", err)
		}
	}
	return nil
}

// openExe opens the binary at name for the sandbox processes, on a
// descriptor above the few that os/exec moves in a new process (its
// standard ones and ExtraFiles), which would otherwise replace it before
// the exec.
func openExe(name string) (*os.File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("the runtime's binary: %w", err)
	}
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 100)
	if err != nil {
		return nil, fmt.Errorf("the runtime's binary: %w", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// startPod records pod sandbox id with its CgroupParent, claims the user
// its process runs as, and starts the process (RunPodSandbox). A pod whose
// process does not start is forgotten, its user given back.
func (s *sandboxProcess) startPod(id, cgroupParent string) error {
	p, err := s.pod(id, cgroupParent)
	if err != nil {
		return fmt.Errorf("sandbox process: %w", err)
	}
	p.mu.Lock()
	if p.child == nil {
		p.child, err = s.startChild(p)
	}
	p.mu.Unlock()
	if err != nil {
		s.removePod(id)
		return fmt.Errorf("sandbox process: %w", err)
	}
	return nil
}

// pod returns the record of pod sandbox id, made (with its user) if it
// has none yet.
func (s *sandboxProcess) pod(id, cgroupParent string) (*podProcess, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pods[id]; p != nil {
		return p, nil
	}
	if id == "" {
		return nil, errors.New("a run names no pod sandbox")
	}
	slot, err := claimUID(s.rootUID)
	if err != nil {
		return nil, err
	}
	p := &podProcess{id: id, cgroupParent: cgroupParent, uid: slot}
	s.pods[id] = p
	return p, nil
}

// lookup returns the record of pod sandbox id, or nil.
func (s *sandboxProcess) lookup(id string) *podProcess {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[id]
}

// stopPod ends pod sandbox id's process (StopPodSandbox): its containers
// have exited.
func (s *sandboxProcess) stopPod(id string) {
	if p := s.lookup(id); p != nil {
		p.stop()
	}
}

// removePod ends pod sandbox id's process and gives back its user and
// cgroup once it has exited (RemovePodSandbox).
func (s *sandboxProcess) removePod(id string) {
	s.mu.Lock()
	p := s.pods[id]
	delete(s.pods, id)
	s.mu.Unlock()
	if p != nil {
		p.remove()
	}
}

// pid is the process ID of pod sandbox id's process, 0 if none runs.
func (s *sandboxProcess) pid(id string) int {
	if p := s.lookup(id); p != nil {
		if child := p.live(); child != nil {
			return child.cmd.Process.Pid
		}
	}
	return 0
}

// live returns the pod's process if it runs, else nil.
func (p *podProcess) live() *sandboxChild {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.child == nil || p.child.isDead() {
		return nil
	}
	return p.child
}

// stop ends the pod's process.
func (p *podProcess) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.child != nil {
		p.child.end()
	}
}

// remove ends the pod's process; once it has exited, its cgroup is
// removed and its user given back (never while a process of it lives).
func (p *podProcess) remove() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removed = true
	child, cg, slot := p.child, p.cgroup, p.uid
	if child != nil {
		child.end()
	}
	go func() {
		if child != nil {
			<-child.exited
		}
		if cg != nil {
			if err := cg.remove(); err != nil {
				klog.ErrorS(err, "The mock runtime could not remove a sandbox process's cgroup", "podSandboxID", p.id)
			}
		}
		slot.release()
	}()
}

// startChild starts pod p's process, in its cgroup when it has a
// CgroupParent (made at the first start). Caller holds p.mu.
func (s *sandboxProcess) startChild(p *podProcess) (*sandboxChild, error) {
	if s.exeErr != nil {
		return nil, s.exeErr
	}
	if p.cgroup == nil {
		cg, err := newPodCgroup(p.cgroupParent, p.id)
		switch {
		case err == nil:
			p.cgroup = cg
		case errors.Is(err, errNoCgroup):
			s.noCgroup.Do(func() {
				klog.InfoS("The mock runtime runs a pod's sandbox process in no cgroup of its own: nothing but the interpreter limits its memory and CPU (said once)", "podSandboxID", p.id, "reason", err)
			})
		default:
			return nil, err
		}
	}
	s.mu.Lock()
	rootUID := s.rootUID
	s.mu.Unlock()
	child, err := startSandboxChild(s.exe, p.id, p.uid.uid, rootUID, p.cgroup, s.net)
	if rootUID != 0 && userNamespaceRefused(err) {
		s.noUserNamespace(err)
		return startSandboxChild(s.exe, p.id, p.uid.uid, 0, p.cgroup, s.net)
	}
	return child, err
}

// userNamespaceRefused reports whether err is the kernel's refusal of a
// new user namespace (disabled, or the limit reached): the runtime goes
// on without.
func userNamespaceRefused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EUSERS) || errors.Is(err, unix.EINVAL)
}

// noUserNamespace makes every later sandbox process start without a user
// namespace of its own, saying what that costs, once.
func (s *sandboxProcess) noUserNamespace(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rootUID == 0 {
		return
	}
	s.rootUID = 0
	klog.InfoS(noUserNamespaceMessage, "err", err)
}

const noUserNamespaceMessage = "The mock runtime cannot give its sandbox processes user namespaces of their own: each keeps no capability, so a container's root reads only what the modes let its pod's user read (a Secret file of mode 0400 is refused)"

// bind binds spec's container's rootfs and mounts into the sandbox
// process's root, as runc bind-mounts them into a container's: each is
// a clone (open_tree) of the very directory or file the runtime pinned at
// CreateContainer, never looked up by its host path again, moved into the
// process's mount namespace (move_mount), nosuid, nodev and noexec, and
// read-only when the mount is. Once per container.
func (c *sandboxChild) bind(spec runSpec) error {
	c.bindMu.Lock()
	defer c.bindMu.Unlock()
	if _, ok := c.bound[spec.Container]; ok {
		return nil
	}
	if c.mntns == nil {
		return errors.New("the sandbox process died")
	}
	var trees []int
	defer func() {
		for _, t := range trees {
			unix.Close(t)
		}
	}()
	clone := func(fd int, ro bool) error {
		t, err := unix.OpenTree(fd, "", unix.AT_EMPTY_PATH|unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("open_tree: %w", err)
		}
		trees = append(trees, t)
		attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC)
		if ro {
			attr |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(t, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
			return fmt.Errorf("mount_setattr: %w", err)
		}
		if c.userns == nil {
			return nil
		}
		// Idmapped with its user namespace: a file of root's is its
		// root's there, one of its pod's user its user's, any other
		// nobody's; what it writes is its user's on the disk, as before.
		// A filesystem that cannot be idmapped is bound as it is: its
		// files of root's are nobody's there.
		err = unix.MountSetattr(t, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(c.userns.Fd())})
		if err != nil {
			noIDMap.Do(func() {
				klog.InfoS("The mock runtime binds a container's files into its sandbox process without idmapping them: a file of root's there is nobody's, and a container's root reads it only if its mode lets anyone (a Secret file of mode 0400 is refused)", "err", err)
			})
		}
		return nil
	}
	rootfs, err := unix.Open(spec.rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("container root: %w", err)
	}
	err = clone(rootfs, false)
	unix.Close(rootfs)
	if err != nil {
		return fmt.Errorf("container root: %w", err)
	}
	for _, ms := range spec.Mounts {
		m := pinnedAt(spec.pinned, ms.Path)
		if m == nil {
			return fmt.Errorf("mount /%s: the runtime pinned nothing", ms.Path)
		}
		var err error
		if m.IsFile() {
			err = clone(int(m.Pin.Fd()), ms.ReadOnly)
		} else {
			var d *os.File
			if d, err = m.Dir.Open("."); err == nil {
				err = clone(int(d.Fd()), ms.ReadOnly)
				d.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("mount /%s: %w", ms.Path, err)
		}
	}
	id := spec.Container
	err = c.inNamespace(func() error {
		// What it makes in the process's root is that root's: the
		// runtime's own user (the host's root) is no one in the
		// namespace that mounted it (its files would be refused).
		if c.rootID != 0 {
			unix.Setfsuid(c.rootID)
			unix.Setfsgid(c.rootID)
		}
		if err := mkdirs(path.Dir(sandboxproc.BoundRootfs(id)), sandboxproc.BoundRootfs(id), "/"+sandboxproc.MountsDir); err != nil {
			return err
		}
		// Its mounts' directory: the process opens it (an os.Root) to
		// pin them; it holds this container's mounts only.
		if err := os.Mkdir(sandboxproc.BoundMounts(id), 0o755); err != nil {
			return err
		}
		if err := moveMount(trees[0], sandboxproc.BoundRootfs(id)); err != nil {
			return err
		}
		for i, ms := range spec.Mounts {
			target := sandboxproc.BoundMount(id, i)
			if ms.File {
				f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
				if err != nil {
					return err
				}
				f.Close()
			} else if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			if err := moveMount(trees[i+1], target); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bind container %s: %w", short(id), err)
	}
	c.bound[id] = len(spec.Mounts)
	return nil
}

// pinnedAt is the pinned mount at container path p, or nil.
func pinnedAt(ms []*sandboxproc.FsMount, p string) *sandboxproc.FsMount {
	for _, m := range ms {
		if m.Path == p {
			return m
		}
	}
	return nil
}

// mkdirs makes each directory that is missing, root's, 0711: the sandbox
// process's user passes through, lists and writes nothing.
func mkdirs(dirs ...string) error {
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// moveMount attaches the detached mount tree at target.
func moveMount(tree int, target string) error {
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount %s: %w", target, err)
	}
	return nil
}

// unbind detaches container id's files from the sandbox process's root
// once its main script ended (what the process holds open stays usable
// until it lets go). Best effort: the process's end detaches everything.
func (c *sandboxChild) unbind(id string) {
	c.bindMu.Lock()
	defer c.bindMu.Unlock()
	n, ok := c.bound[id]
	if !ok || c.mntns == nil {
		return
	}
	delete(c.bound, id)
	err := c.inNamespace(func() error {
		var errs []error
		for i := range n {
			errs = append(errs, unix.Unmount(sandboxproc.BoundMount(id, i), unix.MNT_DETACH), os.Remove(sandboxproc.BoundMount(id, i)))
		}
		errs = append(errs, unix.Unmount(sandboxproc.BoundRootfs(id), unix.MNT_DETACH), os.Remove(sandboxproc.BoundRootfs(id)),
			os.Remove(path.Dir(sandboxproc.BoundRootfs(id))), os.Remove(sandboxproc.BoundMounts(id)))
		return errors.Join(errs...)
	})
	if err != nil {
		klog.V(4).InfoS("The mock runtime left a container's files bound in its pod's sandbox process", "containerID", id, "err", err)
	}
}

// inNamespace runs f on an OS thread of its own in the sandbox process's
// mount namespace, with its root as "/". The thread is spoiled for
// anything else (its file system attributes are its own): it ends with f
// (podnet.OnOwnThread).
func (c *sandboxChild) inNamespace(f func() error) error {
	return podnet.OnOwnThread(func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Setns(int(c.mntns.Fd()), unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("setns: %w", err)
		}
		return f()
	})
}
