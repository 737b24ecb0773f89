package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"mykubelet/mylib/config"
	"mykubelet/mylib/kubetypes"
)

const staticManifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
    image: busybox
`

// podSourcesOf starts MakePodSourceConfig and returns, by pod name, the
// source of every pod ADDed until want pods came.
func podSourcesOf(t *testing.T, s PodSources, want int) (map[string]string, *config.PodConfig) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	pc, err := MakePodSourceConfig(ctx, &wg, s)
	require.NoError(t, err)
	seen := map[string]string{}
	timeout := time.After(30 * time.Second)
	for len(seen) < want {
		select {
		case u := <-pc.Updates():
			if u.Op == kubetypes.ADD {
				for _, p := range u.Pods {
					seen[p.Name] = u.Source
				}
			}
		case <-timeout:
			t.Fatalf("only %v came within 30 s", seen)
		}
	}
	return seen, pc
}

// The API server source needs a real API server (client-go's reflector
// waits for a watch-list bookmark that a fake clientset never sends): see
// TestAdmissionRejectsPodsBoundByHand, whose pods come through
// MakePodSourceConfig, and the chapter tests.

func TestMakePodSourceConfigWithoutAClientReadsOnlyTheFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(staticManifest), 0o600))
	seen, pc := podSourcesOf(t, PodSources{StaticPodPath: dir, NodeName: "n1", Clock: clock.RealClock{}}, 1)
	assert.Equal(t, map[string]string{"web-n1": kubetypes.FileSource}, seen)
	assert.Eventually(t, pc.SeenAllSources, 10*time.Second, 10*time.Millisecond, "the file source alone is all the sources")
}

func TestMakePodSourceConfigNeedsANodeAndAClock(t *testing.T) {
	var wg sync.WaitGroup
	_, err := MakePodSourceConfig(context.Background(), &wg, PodSources{StaticPodPath: t.TempDir(), Clock: clock.RealClock{}})
	assert.EqualError(t, err, "kubelet: PodSources.NodeName and Clock are required")
	_, err = MakePodSourceConfig(context.Background(), &wg, PodSources{NodeName: "n1"})
	assert.EqualError(t, err, "kubelet: PodSources.NodeName and Clock are required")
}
