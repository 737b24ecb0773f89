package fakeruntime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The sandbox image is pinned, as containerd pins the image its
// configuration names (sandbox_image, pinned_images.sandbox): the
// kubelet's image GC never removes a pinned image. Other images, and
// other pause tags, are not.
func TestSandboxImageIsPinned(t *testing.T) {
	r, err := NewRuntime(Config{StateDir: t.TempDir()})
	require.NoError(t, err)
	ctx := context.Background()
	for _, ref := range []string{"k8s.gcr.io/pause:3.10", "registry.k8s.io/pause:3.9", "busybox:1.36"} {
		_, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		require.NoError(t, err, ref)
	}
	pinned := func() map[string]bool {
		list, err := r.ListImages(ctx, &runtimeapi.ListImagesRequest{})
		require.NoError(t, err)
		out := map[string]bool{}
		for _, img := range list.Images {
			for _, tag := range img.RepoTags {
				out[tag] = img.Pinned
			}
		}
		return out
	}
	assert.Equal(t, map[string]bool{"k8s.gcr.io/pause:3.10": false, "registry.k8s.io/pause:3.9": false,
		"docker.io/library/busybox:1.36": false}, pinned(), "not yet: registry.k8s.io/pause:3.10 is not here by that name")

	// The same image under the configured name: pinned, whichever name asks.
	_, err = r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: SandboxImage}})
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"k8s.gcr.io/pause:3.10": true, "registry.k8s.io/pause:3.10": true,
		"registry.k8s.io/pause:3.9": false, "docker.io/library/busybox:1.36": false}, pinned())
	st, err := r.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "k8s.gcr.io/pause:3.10"}})
	require.NoError(t, err)
	assert.True(t, st.Image.Pinned, "ImageStatus says so too")
}
