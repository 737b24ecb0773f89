//go:build tools

// Package kubemark records the one command this module builds: upstream's
// kubelet as a kubemark hollow node, for scripts/startup-bench.sh. It is a
// module of its own so that adding it never changes the control plane's
// module (and so never rebuilds the control plane).
package kubemark

import _ "k8s.io/kubernetes/cmd/kubemark"
