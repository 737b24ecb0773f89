package fakeruntime

import (
	"context"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func pullImage(t *testing.T, r *Runtime, ref string) string {
	t.Helper()
	resp, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	require.NoError(t, err, ref)
	return resp.ImageRef
}

func imageStatus(t *testing.T, r *Runtime, ref string) *runtimeapi.Image {
	t.Helper()
	st, err := r.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	require.NoError(t, err, ref)
	return st.Image
}

func TestKnownImagesAreWellFormed(t *testing.T) {
	digest := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for _, k := range KnownImages {
		require.NotEmpty(t, k.Names)
		for _, n := range k.Names {
			assert.Equal(t, n, repositoryOf(normalizeRef(n)), "%s is a normalized repository name", n)
			assert.False(t, seen[n], "%s is listed once", n)
			seen[n] = true
		}
		for _, ki := range k.Images {
			assert.NotEmpty(t, ki.Tags, k.Names[0])
			for _, v := range []string{ki.Digest, ki.ID} {
				if v != "" {
					assert.Regexp(t, digest, v, k.Names[0])
				}
			}
		}
	}
}

// repositoryOf is a normalized reference without its tag or digest.
func repositoryOf(ref string) string {
	repo, _, _ := splitRef(ref)
	return repo
}

func TestTagsOfOneImageShareItsID(t *testing.T) {
	r, _ := fixture(t)
	const repo = critestRegistry + "test-image-tags"
	ids := []string{pullImage(t, r, repo+":1"), pullImage(t, r, repo+":2"), pullImage(t, r, repo+":3")}
	assert.Equal(t, ids[0], ids[1])
	assert.Equal(t, ids[0], ids[2])
	assert.NotEqual(t, ids[0], pullImage(t, r, critestRegistry+"test-image-1:latest"), "another repository is another image")

	img := imageStatus(t, r, repo+":2")
	require.NotNil(t, img)
	tags := append([]string(nil), img.RepoTags...)
	sort.Strings(tags)
	assert.Equal(t, []string{repo + ":1", repo + ":2", repo + ":3"}, tags)
	assert.Len(t, img.RepoDigests, 1, "one manifest behind the three tags")

	// critest's "all" and "test" tags of test-image-tag are two images.
	assert.NotEqual(t, pullImage(t, r, critestRegistry+"test-image-tag:all"), pullImage(t, r, critestRegistry+"test-image-tag:test"))
}

func TestRegistriesOfOneImageShareItsID(t *testing.T) {
	r, _ := fixture(t)
	a := pullImage(t, r, "registry.k8s.io/pause:3.9")
	b := pullImage(t, r, "k8s.gcr.io/pause:3.9")
	assert.Equal(t, "sha256:e6f1816883972d4be47bd48879a08919b96afcd344132622e4d444987919323c", a, "pause 3.9's real image ID")
	assert.Equal(t, a, b)

	// As containerd lists it: every name that pulled it, a tag and a digest each.
	list, err := r.ListImages(context.Background(), &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: a}}})
	require.NoError(t, err)
	require.Len(t, list.Images, 1)
	img := list.Images[0]
	assert.Equal(t, []string{"registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.9"}, img.RepoTags)
	assert.Equal(t, []string{
		"registry.k8s.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097",
		"k8s.gcr.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097",
	}, img.RepoDigests)
	assert.Equal(t, uint64(321_520), img.Size)
	assert.Equal(t, pullImage(t, r, "registry.k8s.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097"), a,
		"pulled by its digest, the same image")
}

func TestRemovingOneTagRemovesTheImage(t *testing.T) {
	r, _ := fixture(t)
	const repo = critestRegistry + "test-image-tags"
	id := pullImage(t, r, repo+":1")
	pullImage(t, r, repo+":2")
	_, err := r.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: repo + ":1"}})
	require.NoError(t, err)
	for _, ref := range []string{repo + ":1", repo + ":2", id} {
		assert.Nil(t, imageStatus(t, r, ref), "%s is gone with the image", ref)
	}
}

func TestPullByDigest(t *testing.T) {
	r, _ := fixture(t)
	const ref = critestRegistry + "test-image-digest@sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf"
	id := pullImage(t, r, ref)
	img := imageStatus(t, r, ref)
	require.NotNil(t, img)
	assert.Equal(t, id, img.Id)
	assert.Empty(t, img.RepoTags, "pulled by digest only: no tag")
	assert.Equal(t, []string{ref}, img.RepoDigests)
	assert.Equal(t, id, pullImage(t, r, critestRegistry+"test-image-digest:latest"), "the tag that points at that digest is the same image")

	// An image the catalogue does not know keeps the digest its name gives.
	const unknown = "example.com/app@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	pullImage(t, r, unknown)
	img = imageStatus(t, r, unknown)
	require.NotNil(t, img)
	assert.Equal(t, []string{unknown}, img.RepoDigests)
}

func TestUnknownImagesGetAnIDFromTheirName(t *testing.T) {
	r, _ := fixture(t)
	a := pullImage(t, r, "example.com/app:v1")
	b := pullImage(t, r, "example.com/app:v2")
	assert.NotEqual(t, a, b, "without a registry, two tags are two images")
	assert.Equal(t, a, pullImage(t, r, "example.com/app:v1"))
	assert.Nil(t, imageStatus(t, r, "example.com/app:v1").Uid, "no configuration: root, reported as no user")
}

func TestImageStatusReportsTheImageUser(t *testing.T) {
	r, _ := fixture(t)
	for _, tc := range []struct {
		image    string
		uid      *runtimeapi.Int64Value
		username string
	}{
		{"test-image-user-uid", &runtimeapi.Int64Value{Value: 1002}, ""},
		{"test-image-user-username", nil, "www-data"},
		{"test-image-user-uid-group", &runtimeapi.Int64Value{Value: 1003}, ""},
		{"test-image-user-username-group", nil, "www-data"},
		{"test-image-1", nil, ""},
	} {
		ref := critestRegistry + tc.image + ":latest"
		pullImage(t, r, ref)
		img := imageStatus(t, r, ref)
		require.NotNil(t, img, ref)
		assert.Equal(t, tc.uid, img.Uid, ref)
		assert.Equal(t, tc.username, img.Username, ref)
	}
	pullImage(t, r, "registry.k8s.io/pause:3.10")
	assert.Equal(t, int64(65535), imageStatus(t, r, "registry.k8s.io/pause:3.10").GetUid().GetValue())
}

func TestPullTakesTimeAndHonoursTheCallersDeadline(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	r, err := NewRuntime(Config{Clock: clk, StateDir: t.TempDir(), PullLatency: 50 * time.Millisecond, PullBandwidth: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	const ref = "registry.k8s.io/pause:3.9" // 321,520 bytes: 0.31 s at 1 MiB/s
	size := float64(321_520)
	want := 50*time.Millisecond + time.Duration(size/(1<<20)*float64(time.Second))

	// A deadline before the pull ends: DeadlineExceeded, and nothing pulled.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		done <- err
	}()
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 5*time.Second, time.Millisecond, "the pull waits")
	cancel()
	err = <-done
	assert.Equal(t, codes.Canceled, status.Code(err), "%v", err)
	assert.Nil(t, imageStatus(t, r, ref), "a pull cut short leaves nothing")

	require.Eventually(t, func() bool { return clk.Waiters() == 0 }, 5*time.Second, time.Millisecond, "a cut pull stops waiting")

	dctx, dcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer dcancel()
	_, err = r.PullImage(dctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	require.Zero(t, clk.Waiters())

	// Without a deadline it ends when the runtime's clock has run want.
	go func() {
		_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		done <- err
	}()
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 5*time.Second, time.Millisecond, "the pull waits")
	clk.Step(want - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("pull ended before its time: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Millisecond)
	require.NoError(t, waitPull(t, done))
	assert.NotNil(t, imageStatus(t, r, ref))

	// Once present, a pull pays only the registry's round trip.
	go func() {
		_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		done <- err
	}()
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 5*time.Second, time.Millisecond, "the pull waits")
	clk.Step(50 * time.Millisecond)
	require.NoError(t, waitPull(t, done))
}

// waitPull waits for a pull that should end now that the clock has run.
func waitPull(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("the pull did not end when its time had run")
		return nil
	}
}
