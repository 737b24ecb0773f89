//go:build tools

// The conformance module builds upstream's node conformance specs (./e2e,
// from k8s.io/kubernetes test/e2e/common), the ginkgo CLI that runs them in
// parallel, and the programs of the e2e images that can be built offline
// (agnhost, nonewprivs' nnp), for scripts/conformance.sh. It is separate
// from the tutorial module and from scripts/tools (the control plane): the
// e2e framework and agnhost pull in ginkgo, gomega and more that neither
// needs.
package tools

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
)
