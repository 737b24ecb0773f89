// Package e2e is upstream's node conformance suite as one test binary: the
// specs of k8s.io/kubernetes test/e2e/common/node and test/e2e/common/storage
// (sig-node's and sig-storage's, most tagged [NodeConformance]), and of
// test/e2e/node and test/e2e/auth (for their [Conformance] specs), with the e2e
// framework's flags, built by scripts/conformance.sh with `go test -c` and
// run under the ginkgo CLI. It is a smaller test/e2e/e2e_test.go: the same
// flag handling and ginkgo configuration (framework.CreateGinkgoConfig),
// without the other suites' specs, the conformance listing or the reporters
// that upload progress.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"k8s.io/component-base/logs"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	commontest "k8s.io/kubernetes/test/e2e/common"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	e2enode "k8s.io/kubernetes/test/e2e/framework/node"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// The feature and label names, frozen before the specs register.
	_ "k8s.io/kubernetes/test/e2e/feature"

	// The specs: the common ones (most of them [NodeConformance]), and
	// sig-node's and sig-auth's, whose [Conformance] specs need a kubelet
	// (the pod's generation, pod certificates, ClusterTrustBundles).
	_ "k8s.io/kubernetes/test/e2e/auth"
	_ "k8s.io/kubernetes/test/e2e/common/node"
	_ "k8s.io/kubernetes/test/e2e/common/storage"
	_ "k8s.io/kubernetes/test/e2e/node"

	// The framework's dumps on failure and its node helpers, as in test/e2e.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"

	_ "k8s.io/component-base/logs/testinit"
)

func TestMain(m *testing.M) {
	versionFlag := flag.Bool("version", false, "print the e2e framework's version and exit")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *versionFlag {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

// Once, on the first ginkgo process: every node schedulable before a spec
// runs (the capstone joins just before the run). Then, on each process, the
// suite is the cluster e2e one (some common specs differ for e2e_node).
var _ = ginkgo.SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "loading the client")
	framework.ExpectNoError(e2enode.WaitForAllNodesSchedulable(ctx, c, framework.NewTimeoutContext().NodeSchedulable))
	nodes, err := e2enode.GetReadySchedulableNodes(ctx, c)
	framework.ExpectNoError(err)
	if framework.TestContext.CloudConfig.NumNodes == framework.DefaultNumNodes {
		framework.TestContext.CloudConfig.NumNodes = len(nodes.Items)
	}
	framework.Logf("e2e framework %s; %d schedulable node(s)", version.Get().GitVersion, len(nodes.Items))
	return nil
}, func(ctx context.Context, _ []byte) {
	commontest.CurrentSuite = commontest.E2E
})

func TestE2E(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "mykubelet node conformance (k8s.io/kubernetes test/e2e/common)", suiteConfig, reporterConfig)
}
