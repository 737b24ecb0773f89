package fakeruntime

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func pullErr(r *Runtime, ref string) error {
	_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	return err
}

// TestATagTheRegistryDoesNotPublishFailsToPull: the documentation's typo
// nginx:1.161 fails as containerd fails it, and leaves nothing; the tags
// that exist still pull, and so does everything the catalogue does not
// know.
func TestATagTheRegistryDoesNotPublishFailsToPull(t *testing.T) {
	r, _ := fixture(t)
	err := pullErr(r, "nginx:1.161")
	require.Error(t, err)
	assert.Equal(t, codes.NotFound, status.Code(err))
	assert.Equal(t, `rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/nginx:1.161": `+
		`failed to resolve reference "docker.io/library/nginx:1.161": docker.io/library/nginx:1.161: not found`, err.Error())
	assert.Nil(t, imageStatus(t, r, "nginx:1.161"), "nothing pulled")

	for _, bad := range []string{"nginx:1.16.2", "nginx:1.7.13", "nginx:01.16.1", "nginx:latest-alpine", "nginx:1.27-nope",
		"busybox:2", "busybox:1.36.2", "docker.io/library/alpine:3.99", "registry.k8s.io/pause:3.11", "k8s.gcr.io/pause:4.0",
		"registry.k8s.io/e2e-test-images/agnhost:2.8", "registry.k8s.io/etcd:3.5.1", critestRegistry + "test-image-tags:4"} {
		assert.Equal(t, codes.NotFound, status.Code(pullErr(r, bad)), bad)
	}
	for _, good := range []string{"nginx", "nginx:latest", "nginx:1.16.1", "nginx:1.14.2", "nginx:1.7.9", "nginx:1.27", "nginx:1.27.5-alpine",
		"nginx:stable", "nginx:stable-alpine", "nginx:alpine", "nginx:1", "docker.io/library/nginx:1.29.3-trixie-perl",
		"busybox:1.36", "busybox:1.36.1-musl", "busybox:1.28", "busybox:glibc", "alpine:3", "alpine:3.20", "alpine:3.20.3", "alpine:edge",
		"httpd:2.4", "httpd:2.4.62-alpine", "registry.k8s.io/pause:3.10", "k8s.gcr.io/pause:3.9", "registry.k8s.io/pause:3.4.1",
		"registry.k8s.io/e2e-test-images/agnhost:2.53", "registry.k8s.io/etcd:3.5.21-0", "registry.k8s.io/goproxy:0.1",
		"registry.k8s.io/busybox:1.27.2", "polinux/stress", critestRegistry + "test-image-tags:3", critestRegistry + "test-image-tag:all",
		// a repository the catalogue does not know: any tag
		"quay.io/example/app:v9.9.9", "myregistry.local:5000/team/app:dev", "registry.k8s.io/e2e-test-images/nginx:1.14-2",
		// by digest: the digests are not written down, every one pulls
		"nginx@sha256:0000000000000000000000000000000000000000000000000000000000000001"} {
		assert.NoError(t, pullErr(r, good), good)
	}
}

// TestTheTablesPublishTheCataloguesOwnTags: each tag of a known image is
// published, as is latest; a variant does not make "latest-alpine".
func TestTheTablesPublishTheCataloguesOwnTags(t *testing.T) {
	for _, k := range KnownImages {
		for _, ki := range k.Images {
			for _, tag := range ki.Tags {
				assert.True(t, published(&k, tag), "%s:%s", k.Names[0], tag)
			}
		}
		assert.True(t, published(&k, "latest"), "%s:latest", k.Names[0])
		assert.NotNil(t, k.Published, "%s has a table of its tags", k.Names[0])
	}
	assert.False(t, nginxTags.has("latest-alpine"))
	assert.True(t, nginxTags.has("mainline-alpine"))
	assert.Equal(t, []string{"2.9", "2.10", "2.11"}, numbered("2.", 9, 11, ""))
}

// TestAFailedPullTakesTheRoundTrip: the registry's answer takes
// PullLatency on the runtime's clock, and a caller's deadline cuts it.
func TestAFailedPullTakesTheRoundTrip(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	r, err := NewRuntime(Config{Clock: clk, StateDir: t.TempDir(), PullLatency: 50 * time.Millisecond, PullBandwidth: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	done := make(chan error, 1)
	go func() { done <- pullErr(r, "nginx:1.161") }()
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 5*time.Second, time.Millisecond, "the pull waits for the registry")
	clk.Step(50 * time.Millisecond)
	assert.Equal(t, codes.NotFound, status.Code(waitPull(t, done)))

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err = r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.161"}})
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
}

// TestTheDocumentsImagesPull: every image of a catalogued repository that
// a manifest (yaml/, chapters/) or a chapter's README names is published,
// but the tags the documents name to show a failed pull.
func TestTheDocumentsImagesPull(t *testing.T) {
	failOnPurpose := map[string]bool{"nginx:1.161": true}
	root := filepath.Join("..", "..")
	var files []string
	for _, pattern := range []string{"yaml/*.yaml", "yaml/*/*.yaml", "chapters/*/*.yaml", "chapters/*/yaml/*.yaml", "chapters/*/README.md", "README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files)
	image := regexp.MustCompile(`(?:image:\s*"?|--image[= ])([a-z0-9][a-z0-9./:_@-]*[a-z0-9])`)
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range image.FindAllStringSubmatch(string(b), -1) {
			ref := m[1]
			if failOnPurpose[ref] || strings.Contains(ref, "$") {
				continue
			}
			repo, tag, _ := splitRef(normalizeRef(ref))
			if k := knownRepository(repo); k != nil {
				seen++
				assert.True(t, published(k, tag), "%s names %s, which the mock's registry does not publish", f, ref)
			}
		}
	}
	assert.NotZero(t, seen, "the documents name catalogued images")
}
