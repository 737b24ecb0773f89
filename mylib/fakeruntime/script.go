package fakeruntime

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The annotations on a ContainerConfig that script a container. They are
// read by CreateContainer; the control API sets the same fields later
// (POST /containers/{id}/script?exit-after=…).
const (
	// AnnotationExitAfter: the container exits this long after it starts
	// (a Go duration, e.g. "5s").
	AnnotationExitAfter = "fakeruntime.mykubelet.io/exit-after"
	// AnnotationExitCode: the code it exits with then (0-255, default 0).
	AnnotationExitCode = "fakeruntime.mykubelet.io/exit-code"
	// AnnotationRestartAfter: with exit-after, the container starts again
	// this long after it exited on its own, for ever: a crash loop. (A real
	// runtime never restarts a container, the kubelet creates a new one;
	// this stands in for it until the pod workers of chapter 08.)
	AnnotationRestartAfter = "fakeruntime.mykubelet.io/restart-after"
	// AnnotationIgnoreSIGTERM: "true" makes StopContainer wait its whole
	// timeout before the SIGKILL.
	AnnotationIgnoreSIGTERM = "fakeruntime.mykubelet.io/ignore-sigterm"
)

// Script is what a container does on its own.
type Script struct {
	// ExitAfter > 0: exit this long after starting.
	ExitAfter time.Duration
	// ExitCode is the code of that exit.
	ExitCode int32
	// RestartAfter > 0 (with ExitAfter): start again this long after
	// exiting, in place (same container ID), again and again.
	RestartAfter time.Duration
	// IgnoreSIGTERM: StopContainer must wait its timeout, then SIGKILL.
	IgnoreSIGTERM bool
}

// ParseScript reads a Script from a container's annotations.
func ParseScript(annotations map[string]string) (Script, error) {
	return parseScript(func(key string) (string, bool) {
		v, ok := annotations["fakeruntime.mykubelet.io/"+key]
		return v, ok
	})
}

// parseScript reads the fields named exit-after, exit-code, restart-after
// and ignore-sigterm through get, which says whether a field is set.
func parseScript(get func(key string) (string, bool)) (Script, error) {
	var s Script
	var err error
	if v, ok := get("exit-after"); ok {
		if s.ExitAfter, err = time.ParseDuration(v); err != nil || s.ExitAfter <= 0 {
			return Script{}, fmt.Errorf("exit-after %q: want a positive duration such as 5s", v)
		}
	}
	if v, ok := get("exit-code"); ok {
		code, err := strconv.Atoi(v)
		if err != nil || code < 0 || code > 255 {
			return Script{}, fmt.Errorf("exit-code %q: want a number from 0 to 255", v)
		}
		s.ExitCode = int32(code)
	}
	if v, ok := get("restart-after"); ok {
		if s.RestartAfter, err = time.ParseDuration(v); err != nil || s.RestartAfter <= 0 {
			return Script{}, fmt.Errorf("restart-after %q: want a positive duration such as 2s", v)
		}
		if s.ExitAfter == 0 {
			return Script{}, fmt.Errorf("restart-after needs exit-after: a container must exit before it can restart")
		}
	}
	if v, ok := get("ignore-sigterm"); ok {
		if s.IgnoreSIGTERM, err = strconv.ParseBool(v); err != nil {
			return Script{}, fmt.Errorf("ignore-sigterm %q: want true or false", v)
		}
	}
	return s, nil
}

// String describes the script in the words of its fields.
func (s Script) String() string {
	var parts []string
	if s.ExitAfter > 0 {
		parts = append(parts, fmt.Sprintf("exit-after=%s exit-code=%d", s.ExitAfter, s.ExitCode))
	}
	if s.RestartAfter > 0 {
		parts = append(parts, "restart-after="+s.RestartAfter.String())
	}
	if s.IgnoreSIGTERM {
		parts = append(parts, "ignore-sigterm=true")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
