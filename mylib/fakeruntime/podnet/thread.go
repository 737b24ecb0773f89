package podnet

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// OnOwnThread runs fn on an OS thread of its own, locked to it, and waits
// for it. fn may change what belongs to its thread alone (a network or
// mount namespace joined with setns, its file system attributes): the
// thread ends with fn and no other goroutine ever runs there.
//
// Never the main thread: Go does not end that one when a locked goroutine
// leaves it (it wedges it), and /proc/self (its ns/, mounts, net/) shows
// the main thread's namespaces. Spoiled, the whole process would seem, to
// every reader of /proc/self, to live in a pod's namespace.
func OnOwnThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, except on the main thread (onLockedThread)
		errc <- onLockedThread(fn)
	}()
	return <-errc
}

// onLockedThread runs fn on the calling goroutine's thread, which the
// caller has locked, unless it is the main thread: then on another, while
// this goroutine holds the main thread (so that the other cannot be it),
// and the main thread is unlocked again, unspoiled.
func onLockedThread(fn func() error) error {
	if unix.Gettid() != unix.Getpid() {
		return fn()
	}
	defer runtime.UnlockOSThread()
	return OnOwnThread(fn)
}
