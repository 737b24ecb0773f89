package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/kubetypes"
)

const webYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: nginx
`

const sleeperJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"sleeper","namespace":"kube-system"},
 "spec":{"containers":[{"name":"sleep","image":"pause"}]}}`

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	return p
}

func newTestSource(dir string) (*SourceFile, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
	s, err := NewSourceFile(SourceFileConfig{Path: dir, NodeName: "Node-1", Clock: clk})
	if err != nil {
		panic(err)
	}
	return s, clk
}

func TestStaticPodDefaults(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "web.yaml", webYAML)
	s, _ := newTestSource(dir)

	pods := s.listConfig()
	require.Len(t, pods, 1)
	p := pods[0]
	assert.Equal(t, "web-node-1", p.Name, "name is <name>-<node-name>, lower-cased")
	assert.Equal(t, "default", p.Namespace)
	assert.Equal(t, "Node-1", p.Spec.NodeName)
	assert.Len(t, string(p.UID), 32, "UID is a 128-bit hash in hex")
	assert.Equal(t, string(p.UID), p.Annotations[kubetypes.ConfigHashAnnotationKey])
	assert.Equal(t, kubetypes.FileSource, p.Annotations[kubetypes.ConfigSourceAnnotationKey])
	assert.Equal(t, "2026-01-02T03:04:05.000000006Z", p.Annotations[kubetypes.ConfigFirstSeenAnnotationKey])
	assert.Equal(t, []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}, p.Spec.Tolerations)
	assert.Equal(t, v1.PodPending, p.Status.Phase)
	assert.True(t, kubetypes.IsStaticPod(p))
}

func TestStaticPodKeepsNamespaceAndUID(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.json", sleeperJSON)
	writeFile(t, dir, "b.yaml", strings.Replace(webYAML, "name: web\nspec", "name: web\n  uid: my-own-uid\nspec", 1))
	s, _ := newTestSource(dir)

	pods := s.listConfig()
	require.Len(t, pods, 2)
	assert.Equal(t, "kube-system", pods[0].Namespace, "JSON manifests work too")
	assert.Equal(t, "my-own-uid", string(pods[1].UID), "a UID in the manifest is kept")
	assert.Equal(t, "my-own-uid", pods[1].Annotations[kubetypes.ConfigHashAnnotationKey])
}

func TestStaticPodTolerationNotDuplicated(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "web.yaml", webYAML+"  tolerations:\n  - operator: Exists\n    effect: NoExecute\n")
	s, _ := newTestSource(dir)
	pods := s.listConfig()
	require.Len(t, pods, 1)
	assert.Len(t, pods[0].Spec.Tolerations, 1)
}

func TestStaticPodUIDHash(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "web.yaml", webYAML)
	uid := func(nodeName string) string {
		s, err := NewSourceFile(SourceFileConfig{Path: dir, NodeName: nodeName, Period: time.Minute})
		require.NoError(t, err)
		pods := s.listConfig()
		require.Len(t, pods, 1)
		return string(pods[0].UID)
	}
	first := uid("node-1")
	assert.Equal(t, first, uid("node-1"), "same content, same node: same UID")
	assert.NotEqual(t, first, uid("node-2"), "the node name is part of the hash")

	writeFile(t, dir, "web.yaml", strings.Replace(webYAML, "image: nginx", "image: nginx:1.27", 1))
	assert.NotEqual(t, first, uid("node-1"), "an edit gives a new UID")

	require.NoError(t, os.Rename(path, filepath.Join(dir, "other.yaml")))
	writeFile(t, dir, "other.yaml", webYAML)
	assert.NotEqual(t, first, uid("node-1"), "the file path is part of the hash")
}

func TestMalformedManifestIsSkipped(t *testing.T) {
	for name, data := range map[string]string{
		"bad-yaml.yaml":   "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n",
		"not-a-pod.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		"no-name.yaml":    "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: b\n",
		"no-image.yaml":   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: a\n",
		"secret-vol.yaml": webYAML + "  volumes:\n  - name: s\n    secret:\n      secretName: s\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "good.yaml", webYAML)
			bad := writeFile(t, dir, name, data)
			s, _ := newTestSource(dir)

			_, err := s.extractFromFile(bad)
			require.Error(t, err)
			assert.Contains(t, err.Error(), bad, "the error names the file")

			pods := s.listConfig()
			require.Len(t, pods, 1, "the good manifest still counts")
			assert.Equal(t, "web-node-1", pods[0].Name)
		})
	}
}

func TestHiddenFilesAndDirectoriesAreIgnored(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, ".web.yaml.swp", webYAML)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o700))
	writeFile(t, filepath.Join(dir, "sub"), "web.yaml", webYAML)
	s, _ := newTestSource(dir)
	assert.Empty(t, s.listConfig())
}

func TestMissingPathSendsEmptyList(t *testing.T) {
	s, _ := newTestSource(filepath.Join(t.TempDir(), "nope"))
	pods := s.listConfig()
	assert.NotNil(t, pods)
	assert.Empty(t, pods)
}

func TestFirstSeenIsKeptAcrossRelists(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "web.yaml", webYAML)
	s, clk := newTestSource(dir)
	seen := s.listConfig()[0].Annotations[kubetypes.ConfigFirstSeenAnnotationKey]
	clk.Step(time.Hour)
	assert.Equal(t, seen, s.listConfig()[0].Annotations[kubetypes.ConfigFirstSeenAnnotationKey])
}

// TestRunSendsOnStartChangeAndPeriod drives Run with a fake clock: a SET at
// start, one when the directory changes, one every period.
func TestRunSendsOnStartChangeAndPeriod(t *testing.T) {
	dir := t.TempDir()
	updates := make(chan kubetypes.PodUpdate)
	s, clk := newTestSource(dir)
	s.updates = updates
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	next := func() kubetypes.PodUpdate {
		select {
		case u := <-updates:
			return u
		case <-time.After(5 * time.Second):
			t.Fatal("no update")
			return kubetypes.PodUpdate{}
		}
	}
	u := next()
	assert.Equal(t, kubetypes.SET, u.Op)
	assert.Equal(t, kubetypes.FileSource, u.Source)
	assert.Empty(t, u.Pods)

	writeFile(t, dir, "web.yaml", webYAML)
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(ChangePollInterval)
	u = next()
	require.Len(t, u.Pods, 1, "a new file is noticed at the next poll")

	// Nothing changes: polls send nothing; the period relist sends again.
	clk.Step(ChangePollInterval)
	select {
	case u := <-updates:
		t.Fatalf("unexpected update without a change: %+v", u)
	case <-time.After(200 * time.Millisecond):
	}
	clk.Step(DefaultFileCheckFrequency)
	u = next()
	require.Len(t, u.Pods, 1)

	require.NoError(t, os.Remove(filepath.Join(dir, "web.yaml")))
	clk.Step(ChangePollInterval)
	u = next()
	assert.Empty(t, u.Pods, "a removed file is noticed")
}

func TestNewSourceFileRefusesBadIntervals(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range map[string]SourceFileConfig{
		"negative period": {Path: dir, NodeName: "n1", Period: -time.Second},
		"negative poll":   {Path: dir, NodeName: "n1", PollInterval: -time.Second},
		"no path":         {NodeName: "n1"},
		"no node":         {Path: dir},
	} {
		_, err := NewSourceFile(cfg)
		assert.Error(t, err, name)
	}
	s, err := NewSourceFile(SourceFileConfig{Path: dir, NodeName: "n1"})
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{DefaultFileCheckFrequency, ChangePollInterval}, []time.Duration{s.period, s.pollInterval}, "upstream's defaults")
}
