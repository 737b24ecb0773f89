package chaptertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/statedir"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/testcluster"
)

// Fixture is where the end-to-end tests of the chapters that run as a
// registered node (06 on) start: the chapter built, a control plane, and the
// node registered with its own credentials.
type Fixture struct {
	Bin        string // the chapter's binary
	Root       string // the repository root
	Cluster    *testcluster.Cluster
	Admin      *kubernetes.Clientset
	Node       string       // the node's name
	NodeConfig *rest.Config // the node's credentials (RegisterNode)
}

// NewFixture builds chapter (e.g. "./chapters/06-static-pods"), starts a
// control plane and registers node in it.
func NewFixture(t testing.TB, chapter, node string) *Fixture {
	t.Helper()
	f := &Fixture{Bin: testcluster.BuildChapter(t, chapter), Root: testcluster.RepoRoot(t), Node: node}
	f.Cluster = testcluster.Start(t)
	f.Admin = f.Cluster.Clientset(t)
	f.NodeConfig = RegisterNode(t, f.Cluster, node)
	return f
}

// Shell is Shell with the cluster's admin kubeconfig and the fixture's node.
func (f *Fixture) Shell(t testing.TB, script string) string {
	t.Helper()
	return Shell(t, f.Cluster.AdminKubeconfig, f.Node, script)
}

// RegisterNode gives node name its own credentials, a client certificate
// for user system:node:<name> in group system:nodes (what chapter 03
// obtains), and creates its Node object with them (what chapter 04 does).
// It returns the node's config.
func RegisterNode(t testing.TB, c *testcluster.Cluster, name string) *rest.Config {
	t.Helper()
	cfg := c.UserConfig(t, "system:node:"+name, "system:nodes")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s with its own credentials: %v", name, err)
	}
	return cfg
}

// WriteNodeKubeconfig writes cfg where chapter 03 leaves the node
// kubeconfig, stateDir/kubelet.kubeconfig: the default --kubeconfig of the
// chapters after it.
func WriteNodeKubeconfig(t testing.TB, stateDir string, cfg *rest.Config) {
	t.Helper()
	kc, err := os.ReadFile(testcluster.WriteKubeconfig(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := statedir.WriteFile(statedir.Path(stateDir, statedir.NodeKubeconfig), kc); err != nil {
		t.Fatal(err)
	}
}

// AddStaticPod copies manifest, a path from the repository root such as
// yaml/static/static-web.yaml, into stateDir/manifests as a learner's cp
// does, and returns the copy's path.
func AddStaticPod(t testing.TB, stateDir, manifest string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(t), manifest))
	if err != nil {
		t.Fatal(err)
	}
	dir := statedir.Path(stateDir, statedir.ManifestDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(manifest))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ShortTempDir is a new temporary directory with a short path, removed when
// the test ends: a state directory holding a unix socket, whose path must
// fit in 107 bytes, which t.TempDir() does not promise.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ct-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Kubectl runs the control plane's kubectl with --kubeconfig kubeconfig and
// args, and returns what it printed (stdout and stderr); it fails the test
// if kubectl fails.
func Kubectl(t testing.TB, kubeconfig string, args ...string) string {
	t.Helper()
	kubectl := filepath.Join(testcluster.BinDir(), "kubectl")
	out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// Shell runs script with bash in the repository root as a learner types a
// README's lines: kubectl on PATH, KUBECONFIG=kubeconfig, NODE_NAME=node.
// It returns what the script printed, without surrounding space; it fails
// the test if the script fails.
func Shell(t testing.TB, kubeconfig, node, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = testcluster.RepoRoot(t)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "NODE_NAME="+node, "PATH="+testcluster.BinDir()+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

// CheckReadyConditions checks the conditions a healthy kubelet posts on its
// Node: MemoryPressure, DiskPressure and PIDPressure False, Ready True with
// reason KubeletReady. It returns the Ready condition.
func CheckReadyConditions(t testing.TB, n *v1.Node) *v1.NodeCondition {
	t.Helper()
	for _, typ := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		_, c := nodestatus.GetNodeCondition(&n.Status, typ)
		require.NotNil(t, c, typ)
		assert.Equal(t, v1.ConditionFalse, c.Status, typ)
	}
	_, ready := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady)
	require.NotNil(t, ready)
	assert.Equal(t, v1.ConditionTrue, ready.Status)
	assert.Equal(t, "KubeletReady", ready.Reason)
	return ready
}

// ExpectedOutput returns the lines of the "## Expected output" block of the
// README at path readme; it fails the test if there is none.
func ExpectedOutput(t testing.TB, readme string) []string {
	t.Helper()
	lines, err := docscheck.ExpectedOutput(readme)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// MatchSection checks output against the first fenced block under heading
// in the README at path readme, leaving out the block's "$ command" lines
// (docscheck.Match); it fails the test if the block is empty or does not
// match.
func MatchSection(t testing.TB, readme, heading, output string) {
	t.Helper()
	markdown, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	block, err := docscheck.ExpectedOutputOf(string(markdown), heading)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range block {
		if !strings.HasPrefix(l, "$ ") {
			want = append(want, l)
		}
	}
	if len(want) == 0 {
		t.Fatalf("README section %q: no expected lines", heading)
	}
	if err := docscheck.Match(want, output); err != nil {
		t.Fatalf("README section %q: %v", heading, err)
	}
}
