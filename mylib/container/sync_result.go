package container

import (
	"errors"
	"fmt"
	"strings"
	"time"
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
	ResizePodInPlace SyncAction = "ResizePodInPlace"
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
	ErrResizePodInPlace      = errors.New("ResizePodInPlaceError")
)

// BackoffError is an error that says when to try again: a container in
// CrashLoopBackOff carries the end of its back-off, so the pod worker
// retries then instead of after its usual backOffPeriod (upstream
// BackoffError). Its text is the wrapped error's ("CrashLoopBackOff").
type BackoffError struct {
	error
	backoffTime time.Time
}

// NewBackoffError wraps err with the time its back-off ends.
func NewBackoffError(err error, backoffTime time.Time) *BackoffError {
	return &BackoffError{error: err, backoffTime: backoffTime}
}

// BackoffTime is when the back-off ends.
func (e *BackoffError) BackoffTime() time.Time { return e.backoffTime }

// Unwrap lets errors.Is see the wrapped error (ErrCrashLoopBackOff).
func (e *BackoffError) Unwrap() error { return e.error }

// MinBackoffExpiration finds every BackoffError in err (through wrapping
// and joined errors) and returns the earliest end of back-off.
func MinBackoffExpiration(err error) (time.Time, bool) {
	switch e := err.(type) {
	case nil:
		return time.Time{}, false
	case *BackoffError:
		return e.backoffTime, true
	case interface{ Unwrap() []error }:
		var earliest time.Time
		found := false
		for _, inner := range e.Unwrap() {
			if t, ok := MinBackoffExpiration(inner); ok && (!found || t.Before(earliest)) {
				earliest, found = t, true
			}
		}
		return earliest, found
	default:
		return MinBackoffExpiration(errors.Unwrap(err))
	}
}

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
// returns nil when all went well. The errors stay wrapped, so errors.Is
// and MinBackoffExpiration see them.
func (p PodSyncResult) Error() error {
	var errs syncErrors
	if p.SyncError != nil {
		errs = append(errs, fmt.Errorf("failed to SyncPod: %w", p.SyncError))
	}
	for _, r := range p.SyncResults {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("failed to %q for %q with %w: %q", r.Action, r.Target, r.Error, r.Message))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// syncErrors are joined on one line ("; "), unlike errors.Join's lines.
type syncErrors []error

func (e syncErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e syncErrors) Unwrap() []error { return e }
