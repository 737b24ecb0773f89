//go:build tools

// The containerd module builds containerd v2 (containerd, ctr and the runc
// shim) from its Go module for scripts/containerd.sh when
// MYKUBELET_CONTAINERD=v2. Like the tools module, the tutorial never imports it.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
