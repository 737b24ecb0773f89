package fakeruntime

import (
	"path/filepath"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// podFacing rewrites a CreateContainer error for the pod's author, who
// reads it in the kubelet's CreateContainerError event: the host's paths
// are not theirs to see. A mount's host path becomes its path in the
// container ("<volume of /data>"), and the mount roots and the runtime's
// state directory, and the paths in them, lose the host's part
// ("<mount root>/…", "<runtime state>/…"). The error as it was, host
// paths and all, goes to the runtime's log, for the node's admin.
func (r *Runtime) podFacing(name string, err error, mounts []*runtimeapi.Mount) string {
	msg := err.Error()
	type sub struct{ from, to string }
	var subs []sub
	for _, mt := range mounts {
		if hp := mt.GetHostPath(); filepath.IsAbs(hp) {
			subs = append(subs, sub{filepath.Clean(hp), "<volume of " + mt.GetContainerPath() + ">"})
		}
	}
	r.mu.Lock()
	state := r.stateDir
	r.mu.Unlock()
	for _, root := range r.mountRoots {
		subs = append(subs, sub{root, "<mount root>"})
		if real, err := filepath.EvalSymlinks(root); err == nil && real != root {
			subs = append(subs, sub{real, "<mount root>"})
		}
	}
	if state != "" {
		subs = append(subs, sub{filepath.Clean(state), "<runtime state>"})
		if real, err := filepath.EvalSymlinks(state); err == nil && real != state {
			subs = append(subs, sub{real, "<runtime state>"})
		}
	}
	// Longest first: a volume's path is inside a mount root.
	slices.SortStableFunc(subs, func(a, b sub) int { return len(b.from) - len(a.from) })
	out := msg
	for _, s := range subs {
		if s.from != "/" && s.from != "." {
			out = strings.ReplaceAll(out, s.from, s.to)
		}
	}
	if out != msg {
		klog.InfoS("CreateContainer failed", "container", name, "err", msg)
	}
	return out
}
