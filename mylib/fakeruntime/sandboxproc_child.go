package fakeruntime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"mykubelet/mylib/fakeruntime/podnet"
	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// One sandbox process, as the runtime sees it: its start, walled in by the
// kernel before it reads a script (the table in sandboxproc.go), and the
// unix socket pair the runtime talks to it over: the runs it sends, the
// exits and figures it answers, the frames of each run's output.

// sandboxChild is one sandbox process, alive or dead.
type sandboxChild struct {
	pod    string // its pod sandbox's ID
	cmd    *exec.Cmd
	conn   *net.UnixConn
	stderr *tailBuffer
	mntns  *os.File   // its mount namespace, where the runtime binds its containers' files
	userns *os.File   // its user namespace, which idmaps those binds (nil: it has none)
	rootID int        // the host's id of its root (0: it has no user namespace)
	cgroup *podCgroup // nil: none
	oom    uint64     // the cgroup's OOM kills when it started
	exited chan struct{}
	bindMu sync.Mutex     // guards bound and mntns's life
	bound  map[string]int // the containers bound into its root, with their number of mounts

	mu      sync.Mutex
	runs    map[string]*remoteRun
	queries map[string]chan sandboxproc.RunExit // the opUsage requests waiting for their answers
	dead    bool
	closing bool       // the runtime ends it: its end is no news
	sent    sync.Mutex // one message at a time on conn
}

// startSandboxChild starts the runtime's binary (exe) as the sandbox
// process of pod, running as uid, in cg (nil: none), in a user namespace
// whose root is rootUID (0: none).
func startSandboxChild(exe *os.File, pod string, uid, rootUID int, cg *podCgroup, pn *podnet.Network) (*sandboxChild, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ourFile, theirFile := os.NewFile(uintptr(fds[0]), "sandbox"), os.NewFile(uintptr(fds[1]), "sandbox")
	defer theirFile.Close() // if it did not start
	fc, err := net.FileConn(ourFile)
	ourFile.Close()
	if err != nil {
		return nil, err
	}
	conn := fc.(*net.UnixConn)
	cfg, _ := json.Marshal(sandboxproc.SandboxConfig{Dir: sandboxRootDir, NoNet: pn == nil, UID: uid, RootUID: rootUID}) // plain fields always marshal
	stderr := &tailBuffer{max: 4096}
	cmd := &exec.Cmd{
		// The binary the runtime was started from, by the descriptor it
		// opened then: a binary rebuilt since is not the sandbox.
		Path:       fmt.Sprintf("/proc/self/fd/%d", exe.Fd()),
		Args:       []string{"mykubelet-sandbox"},
		Env:        []string{sandboxproc.SandboxEnv + "=" + string(cfg)}, // nothing of the runtime's environment
		Dir:        "/",
		Stdout:     stderr,
		Stderr:     stderr,
		ExtraFiles: []*os.File{theirFile}, // fd 3
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		},
	}
	if pn == nil {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNET
	}
	if rootUID != 0 {
		// Its own user namespace (IDMap), in which it starts as root: the
		// namespaces born with it are that namespace's, so its root may
		// mount its own root there; the pod network's stays the host's.
		ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: rootUID, Size: 1}, {ContainerID: uid, HostID: uid, Size: 1}}
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings, cmd.SysProcAttr.GidMappings = ids, ids
		cmd.SysProcAttr.GidMappingsEnableSetgroups = true // so that it can drop the runtime's groups
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	}
	if err := startWalledIn(cmd, pn); err != nil {
		conn.Close()
		return nil, err
	}
	theirFile.Close() // its own now: if it exits, the wait for its word ends at once
	child := &sandboxChild{pod: pod, cmd: cmd, conn: conn, stderr: stderr, cgroup: cg, exited: make(chan struct{}),
		runs: map[string]*remoteRun{}, queries: map[string]chan sandboxproc.RunExit{}, bound: map[string]int{}}
	fail := func(err error) (*sandboxChild, error) {
		conn.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		child.closeNamespaces()
		return nil, err
	}
	// Into its pod's cgroup before it runs a script (it runs none before
	// the runtime sends one).
	if cg != nil {
		child.oom = cg.oomKills()
		if err := cg.add(cmd.Process.Pid); err != nil {
			return fail(err)
		}
	}
	// It says it is ready once walled in; before that, it runs nothing.
	buf := make([]byte, 256)
	_ = conn.SetReadDeadline(time.Now().Add(sandboxStartTimeout))
	n, _, _, _, err := conn.ReadMsgUnix(buf, nil)
	_ = conn.SetReadDeadline(time.Time{})
	var ready sandboxproc.RunExit
	if err != nil || n == 0 || json.Unmarshal(buf[:n], &ready) != nil || ready.ID != sandboxproc.ReadyID {
		return fail(fmt.Errorf("it did not start: %s", bytes.TrimSpace([]byte(stderr.String()))))
	}
	// Its mount namespace, now that it has its own root there, and its
	// user namespace.
	if child.mntns, err = os.Open(fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid)); err != nil {
		return fail(err)
	}
	if rootUID != 0 {
		if child.userns, err = os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid)); err != nil {
			return fail(err)
		}
		child.rootID = rootUID
	}
	go child.readExits()
	return child, nil
}

// sandboxStartTimeout bounds the wait for it (a loaded machine takes a
// second or two to start a Go binary).
const sandboxStartTimeout = 30 * time.Second

// startWalledIn starts cmd from an OS thread of its own that first joins
// the pod network's namespace (the child is born in it: once it is nobody
// it could not join it) and sets no_new_privs (which the child inherits:
// Go cannot set it on all of its own threads). There it also lets any
// user bind the ports below 1024, as the images' servers do (nginx on
// 80): the pod network's namespace is the host's user namespace's, in
// which the child holds no capability. The thread is spoiled for anything
// else, so it ends with cmd's start (podnet.OnOwnThread).
func startWalledIn(cmd *exec.Cmd, pn *podnet.Network) error {
	return podnet.OnOwnThread(func() error {
		if pn != nil {
			if err := pn.Enter(); err != nil {
				return err
			}
			if err := os.WriteFile("/proc/sys/net/ipv4/ip_unprivileged_port_start", []byte("0"), 0); err != nil {
				return fmt.Errorf("unprivileged ports: %w", err)
			}
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
		return cmd.Start()
	})
}

// closeNamespaces lets go of its namespaces. Caller holds c.bindMu, or
// c is not shared yet.
func (c *sandboxChild) closeNamespaces() {
	for _, f := range []**os.File{&c.mntns, &c.userns} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// send writes one message, with files passed as descriptors.
func (c *sandboxChild) send(spec sandboxproc.RunSpec, files []*os.File) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	c.sent.Lock()
	defer c.sent.Unlock()
	_, _, err = c.conn.WriteMsgUnix(b, oob, nil)
	return err
}

// readExits reads the exits the sandbox process reports until it dies;
// then every run still going has exited with 137.
func (c *sandboxChild) readExits() {
	buf := make([]byte, 64<<10)
	for {
		n, _, _, _, err := c.conn.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			break
		}
		var e sandboxproc.RunExit
		if json.Unmarshal(buf[:n], &e) != nil {
			continue
		}
		if !c.answer(e) {
			c.finish(e)
		}
	}
	c.mu.Lock()
	c.dead = true
	runs, closing := c.runs, c.closing
	c.runs = map[string]*remoteRun{}
	for id, q := range c.queries {
		close(q)
		delete(c.queries, id)
	}
	c.mu.Unlock()
	werr := c.cmd.Wait()
	c.bindMu.Lock()
	c.closeNamespaces()
	c.bindMu.Unlock()
	reason := ""
	if c.cgroup != nil && c.cgroup.oomKills() > c.oom {
		reason = ReasonOOMKilled // the kernel's OOM killer ended it, at its pod cgroup's memory limit
	}
	close(c.exited)
	if !closing {
		klog.ErrorS(werr, "The mock runtime's sandbox process of a pod died; its containers have exited", "podSandboxID", c.pod, "runs", len(runs), "reason", reason, "output", c.stderr.String())
	}
	for _, r := range runs {
		r.code, r.reason = ExitCodeSIGKILL, reason
		close(r.exited)
	}
}

// isDead says whether the process has died (or is ending).
func (c *sandboxChild) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// end ends the process: its end is no news.
func (c *sandboxChild) end() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.conn.Close() // it exits when its end of the socket closes
	_ = c.cmd.Process.Kill()
}

// finish records the exit of run e.ID.
func (c *sandboxChild) finish(e sandboxproc.RunExit) {
	c.mu.Lock()
	r := c.runs[e.ID]
	delete(c.runs, e.ID)
	c.mu.Unlock()
	if r != nil {
		r.code, r.reason = e.Code, e.Reason
		if e.Usage != nil {
			r.usage = *e.Usage
		}
		close(r.exited)
	}
}

// answer hands e to the opUsage request waiting for it, if it is one's.
func (c *sandboxChild) answer(e sandboxproc.RunExit) bool {
	c.mu.Lock()
	q := c.queries[e.ID]
	if q != nil && !e.More {
		delete(c.queries, e.ID)
	}
	c.mu.Unlock()
	if q == nil {
		return false
	}
	q <- e // buffered for every part of an answer (see usage)
	if !e.More {
		close(q)
	}
	return true
}

// usage asks this sandbox process what its containers use now.
func (child *sandboxChild) usage(ctx context.Context) (map[string]sandboxproc.ScriptUsage, error) {
	out := map[string]sandboxproc.ScriptUsage{}
	id := "usage-" + newRunID()
	q := make(chan sandboxproc.RunExit, sandboxproc.MaxUsageParts)
	child.mu.Lock()
	if child.dead {
		child.mu.Unlock()
		return out, nil // its containers have exited: the runtime keeps their last figures
	}
	child.queries[id] = q
	child.mu.Unlock()
	drop := func() {
		child.mu.Lock()
		delete(child.queries, id)
		child.mu.Unlock()
	}
	if err := child.send(sandboxproc.RunSpec{Op: sandboxproc.OpUsage, ID: id}, nil); err != nil {
		drop()
		return nil, fmt.Errorf("sandbox process: %w", err)
	}
	timer := time.NewTimer(usageTimeout)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-q:
			if !ok {
				return out, nil // answered, or it died: what came is what there is
			}
			for k, v := range e.Usages {
				out[k] = v
			}
		case <-ctx.Done():
			drop()
			return nil, ctx.Err()
		case <-timer.C:
			drop()
			return nil, errors.New("sandbox process: no answer to a usage request")
		}
	}
}

// readFrames copies the frames of r to stdout and stderr until r ends; a
// frame of stream 3 says how many bytes of stdin the script has read, now
// that it waits for more (stdinReport), and goes to consumed.
func readFrames(r io.Reader, stdout, stderr io.Writer, consumed func(int64)) {
	br := bufio.NewReaderSize(r, 4<<10) // a thousand idle containers hold one each
	var head [sandboxproc.FrameHeader]byte
	buf := make([]byte, sandboxproc.MaxFrame)
	for {
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return
		}
		n := int(head[1])<<8 | int(head[2])
		if n > sandboxproc.MaxFrame {
			return // not a frame of ours: stop reading
		}
		if _, err := io.ReadFull(br, buf[:n]); err != nil {
			return
		}
		w := stdout
		switch head[0] {
		case 2:
			w = stderr
		case 3:
			if n == 8 {
				consumed(int64(binary.BigEndian.Uint64(buf[:8])))
			}
			continue
		}
		_, _ = w.Write(buf[:n])
	}
}
