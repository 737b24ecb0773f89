package fakeruntime

// The names of the sandbox process's package (mylib/fakeruntime/sandboxproc)
// that are part of this runtime's own: its exit codes and reasons, its
// limits and its users are the runtime's.

import (
	"time"

	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// Exit codes and reasons of the containers' scripts, as a shell and
// containerd report them (see the sandboxproc package).
const (
	ExitCodeNotFound      = sandboxproc.ExitCodeNotFound
	ExitCodeSIGTERM       = sandboxproc.ExitCodeSIGTERM
	ExitCodeSIGKILL       = sandboxproc.ExitCodeSIGKILL
	ExitCodeInternalError = sandboxproc.ExitCodeInternalError
	ReasonOOMKilled       = sandboxproc.ReasonOOMKilled
)

// The limits a container's scripts run under when its config sets none.
const (
	DefaultContainerMemory = sandboxproc.DefaultContainerMemory
	DefaultPodPidsLimit    = sandboxproc.DefaultPodPidsLimit
)

// The users the sandbox processes run as (sandboxproc_uid.go).
const (
	SandboxUIDBase  = sandboxproc.SandboxUIDBase
	SandboxUIDCount = sandboxproc.SandboxUIDCount
)

// ErrNoPodNetwork: the runtime was not asked for a pod network.
var ErrNoPodNetwork = sandboxproc.ErrNoPodNetwork

// Utilities are the commands, besides the shell's builtins, that a script
// can run.
var Utilities = sandboxproc.Utilities

// scriptClock is the runtime's clock as the interpreter takes it.
type scriptClock struct{ clock.Clock }

func (c scriptClock) NewTimer(d time.Duration) sandboxproc.Timer { return c.Clock.NewTimer(d) }
