package container

import (
	"errors"
	"fmt"
	"strings"
)

// SyncAction names one step of a pod sync, as upstream's
// pkg/kubelet/container/sync_result.go.
type SyncAction string

// The sync actions.
const (
	StartContainer   SyncAction = "StartContainer"
	KillContainer    SyncAction = "KillContainer"
	InitContainer    SyncAction = "InitContainer"
	CreatePodSandbox SyncAction = "CreatePodSandbox"
	ConfigPodSandbox SyncAction = "ConfigPodSandbox"
	KillPodSandbox   SyncAction = "KillPodSandbox"
)

// The errors a sync step fails with. Their text is the reason a container's
// status shows while it waits (e.g. "CrashLoopBackOff").
var (
	ErrCrashLoopBackOff      = errors.New("CrashLoopBackOff")
	ErrRunContainer          = errors.New("RunContainerError")
	ErrCreateContainer       = errors.New("CreateContainerError")
	ErrCreateContainerConfig = errors.New("CreateContainerConfigError")
	ErrKillContainer         = errors.New("KillContainerError")
	ErrRunInitContainer      = errors.New("RunInitContainerError")
	ErrCreatePodSandbox      = errors.New("CreatePodSandboxError")
	ErrConfigPodSandbox      = errors.New("ConfigPodSandboxError")
	ErrKillPodSandbox        = errors.New("KillPodSandboxError")
)

// SyncResult is what happened to one action of a sync: Target is the
// container name (or the pod, or a sandbox ID); Error is nil on success.
type SyncResult struct {
	Action  SyncAction
	Target  any
	Error   error
	Message string
}

// NewSyncResult returns a successful result of action on target.
func NewSyncResult(action SyncAction, target any) *SyncResult {
	return &SyncResult{Action: action, Target: target}
}

// Fail records that the action failed with err (one of the Err values
// above, or an image error) and a message for people.
func (r *SyncResult) Fail(err error, msg string) {
	r.Error, r.Message = err, msg
}

// PodSyncResult is the result of one SyncPod or KillPod: every action tried,
// and an error that ended the sync early.
type PodSyncResult struct {
	SyncResults []*SyncResult
	SyncError   error
}

// AddSyncResult appends results.
func (p *PodSyncResult) AddSyncResult(result ...*SyncResult) {
	p.SyncResults = append(p.SyncResults, result...)
}

// AddPodSyncResult appends the results of another sync and keeps its error.
func (p *PodSyncResult) AddPodSyncResult(result PodSyncResult) {
	p.AddSyncResult(result.SyncResults...)
	if result.SyncError != nil {
		p.SyncError = result.SyncError
	}
}

// Fail records an error that ended the sync.
func (p *PodSyncResult) Fail(err error) { p.SyncError = err }

// Error joins the sync error and every failed action into one error, or
// returns nil when all went well.
func (p PodSyncResult) Error() error {
	var msgs []string
	if p.SyncError != nil {
		msgs = append(msgs, "failed to SyncPod: "+p.SyncError.Error())
	}
	for _, r := range p.SyncResults {
		if r.Error != nil {
			msgs = append(msgs, fmt.Sprintf("failed to %q for %q with %v: %q", r.Action, r.Target, r.Error, r.Message))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}
