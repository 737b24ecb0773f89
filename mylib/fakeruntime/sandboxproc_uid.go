package fakeruntime

// The users of the sandbox processes: each pod's process runs as a user
// (and group) of its own, so that the kernel keeps one pod's process from
// signalling, tracing or writing the files of another's, and any other
// local user from signalling any of them.
//
// They come from a range the runtime owns, SandboxUIDBase up to
// SandboxUIDBase+SandboxUIDCount-1, less every id /etc/subuid or
// /etc/subgid hands a local user (the second user's usual range,
// 165536-231071, overlaps it), read at each claim. Several mock runtimes may run on one machine (the
// tests start many, as root): a uid is claimed with an exclusive flock(2)
// on a file named after it in sandboxUIDDir, held by the runtime for the
// pod's life. The kernel drops the lock when the runtime exits however it
// exits, so a crashed runtime leaves no uid taken. A runtime gives a uid
// back only once the pod's process has exited.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// sandboxUIDDir holds the lock files of the uids (root's, 0700).
var sandboxUIDDir = "/run/mykubelet/sandbox-uids"

// subIDFiles are the subordinate id files whose ranges no sandbox uses.
var subIDFiles = []string{"/etc/subuid", "/etc/subgid"}

// subordinateRanges reads the ranges ({first, count}) of files in
// /etc/subuid's form (user:first:count a line); a missing file holds none.
func subordinateRanges(files ...string) ([][2]int, error) {
	var ranges [][2]int
	for _, name := range files {
		b, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("sandbox users: %w", err)
		}
		for line := range strings.Lines(string(b)) {
			f := strings.Split(strings.TrimSpace(line), ":")
			if len(f) != 3 || strings.HasPrefix(f[0], "#") {
				continue
			}
			first, err1 := strconv.Atoi(f[1])
			count, err2 := strconv.Atoi(f[2])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("sandbox users: %s: bad line %q", name, strings.TrimSpace(line))
			}
			ranges = append(ranges, [2]int{first, count})
		}
	}
	return ranges, nil
}

// uidSlot is a claimed uid: its lock file, locked.
type uidSlot struct {
	uid  int
	lock *os.File
}

// uidCursor is where the next claim of this process starts looking, so
// that a burst does not try the same taken uids again and again.
var uidCursor struct {
	sync.Mutex
	next int
}

// claimUID claims a free uid of the range, neither the root stand-in nor
// avoid (the one its runtime chose: /etc/subuid may have changed since).
func claimUID(avoid int) (*uidSlot, error) {
	if err := os.MkdirAll(sandboxUIDDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox users: %w", err)
	}
	fi, err := os.Lstat(sandboxUIDDir)
	if err != nil {
		return nil, fmt.Errorf("sandbox users: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("sandbox users: %s is not a directory only root may write", sandboxUIDDir)
	}
	subordinate, err := subordinateRanges(subIDFiles...)
	if err != nil {
		return nil, err
	}
	standIn, _ := firstClear(subordinate) // none clear: no uid is either
	uidCursor.Lock()
	defer uidCursor.Unlock()
	for i := range SandboxUIDCount {
		slot := (uidCursor.next + i) % SandboxUIDCount
		uid := SandboxUIDBase + slot
		if inRanges(subordinate, uid) || uid == standIn || uid == avoid {
			continue
		}
		f, err := os.OpenFile(filepath.Join(sandboxUIDDir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("sandbox users: %w", err)
		}
		// A lock is its open file's: another open of the same file, in
		// this process too, cannot take it.
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			uidCursor.next = slot + 1
			return &uidSlot{uid: uid, lock: f}, nil
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("sandbox users: lock %d: %w", uid, err)
		}
	}
	return nil, fmt.Errorf("sandbox users: all %d of %d-%d are taken or in /etc/subuid or /etc/subgid", SandboxUIDCount, SandboxUIDBase, SandboxUIDBase+SandboxUIDCount-1)
}

// rootStandIn is the host's user (and group) that stands for root in
// every sandbox process's user namespace (sandboxproc.IDMap): the first of
// the range clear of /etc/subuid and /etc/subgid, given to no pod. A
// file of root's, on a mount the runtime idmapped for a sandbox process,
// is the stand-in's there, which the process's capability reads and its
// user does not own. No process runs as the stand-in but a sandbox
// process's first start, as the root of its own namespace, while it
// walls itself in.
func rootStandIn() (int, error) {
	subordinate, err := subordinateRanges(subIDFiles...)
	if err != nil {
		return 0, err
	}
	return firstClear(subordinate)
}

// firstClear is the first id of the range in none of ranges.
func firstClear(ranges [][2]int) (int, error) {
	for id := SandboxUIDBase; id < SandboxUIDBase+SandboxUIDCount; id++ {
		if !inRanges(ranges, id) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("sandbox users: all of %d-%d are in /etc/subuid or /etc/subgid", SandboxUIDBase, SandboxUIDBase+SandboxUIDCount-1)
}

// inRanges reports whether id is in one of ranges ({first, count}).
func inRanges(ranges [][2]int, id int) bool {
	return slices.ContainsFunc(ranges, func(r [2]int) bool { return id >= r[0] && id < r[0]+r[1] })
}

// release gives the uid back.
func (s *uidSlot) release() {
	if s != nil && s.lock != nil {
		s.lock.Close() // the lock goes with it; the file stays, for the next claim
	}
}
