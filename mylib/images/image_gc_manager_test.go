package images

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
)

// fakeImages is a CRI image service of ListImages and RemoveImage, with
// the containers that use its images (GetPods) and the image filesystem
// of capacity bytes that they fill (ImageFsStats).
type fakeImages struct {
	runtimeapi.ImageServiceClient
	kubecontainer.Runtime

	mu        sync.Mutex
	images    map[string]*runtimeapi.Image
	inUse     map[string]bool // image IDs a container uses
	removed   []string
	removeErr error
	capacity  uint64
	lists     int
}

func newFakeImages(capacity uint64) *fakeImages {
	return &fakeImages{images: map[string]*runtimeapi.Image{}, inUse: map[string]bool{}, capacity: capacity}
}

func (f *fakeImages) add(id string, size uint64) *fakeImages {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[id] = &runtimeapi.Image{Id: id, RepoTags: []string{id + ":v1"}, Size: size}
	return f
}

func (f *fakeImages) pin(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[id].Pinned = true
}

func (f *fakeImages) use(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inUse = map[string]bool{}
	for _, id := range ids {
		f.inUse[id] = true
	}
}

func (f *fakeImages) left() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.images {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (f *fakeImages) ListImages(context.Context, *runtimeapi.ListImagesRequest, ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	resp := &runtimeapi.ListImagesResponse{}
	for _, img := range f.images {
		resp.Images = append(resp.Images, img)
	}
	return resp, nil
}

func (f *fakeImages) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest, _ ...grpc.CallOption) (*runtimeapi.RemoveImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removeErr != nil {
		return nil, f.removeErr
	}
	f.removed = append(f.removed, req.Image.Image)
	delete(f.images, req.Image.Image)
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (f *fakeImages) GetPods(context.Context, bool) ([]*kubecontainer.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pod := &kubecontainer.Pod{ID: "uid", Name: "web", Namespace: "default"}
	for id := range f.inUse {
		pod.Containers = append(pod.Containers, &kubecontainer.Container{Name: "c-" + id, ImageID: id})
	}
	return []*kubecontainer.Pod{pod}, nil
}

func (f *fakeImages) ImageFsStats(context.Context) (*statsapi.FsStats, *statsapi.FsStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var used uint64
	for _, img := range f.images {
		used += img.Size
	}
	available := f.capacity - min(used, f.capacity)
	fs := &statsapi.FsStats{CapacityBytes: &f.capacity, UsedBytes: &used, AvailableBytes: &available}
	return fs, fs, nil
}

var nodeRef = &v1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"}

func newGC(t *testing.T, f *fakeImages, policy ImageGCPolicy) (*realImageGCManager, *clocktesting.FakeClock, *record.FakeRecorder) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	rec := record.NewFakeRecorder(100)
	gc, err := NewImageGCManager(f, f, f, rec, nodeRef, policy, clk)
	require.NoError(t, err)
	return gc.(*realImageGCManager), clk, rec
}

var defaultPolicy = ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}

func TestGarbageCollectFreesLeastRecentlyUsedFirstDownToTheLowThreshold(t *testing.T) {
	ctx := context.Background()
	// 1000 bytes: a pinned 500, four images of 100 (90 % full).
	f := newFakeImages(1000).add("pause", 500).add("a", 100).add("b", 100).add("c", 100).add("d", 100)
	f.pin("pause")
	gc, clk, rec := newGC(t, f, ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 70, MinAge: time.Minute})

	// Containers use c, then b, then a, then d, each for a minute: a
	// was last used before d, b before a, c before b.
	for _, id := range []string{"c", "b", "a", "d"} {
		f.use(id)
		_, err := gc.detectImages(ctx, clk.Now())
		require.NoError(t, err)
		clk.Step(time.Minute)
	}
	f.use("d") // still in use

	// Down to 70 %: 200 bytes to free: c, then b.
	require.NoError(t, gc.GarbageCollect(ctx, t0))
	assert.Equal(t, []string{"c", "b"}, f.removed)
	assert.Equal(t, []string{"a", "d", "pause"}, f.left())
	assert.Empty(t, drain(rec))

	// 70 % full: under the high threshold, nothing goes.
	require.NoError(t, gc.GarbageCollect(ctx, t0))
	assert.Equal(t, []string{"c", "b"}, f.removed)
}

func TestGarbageCollectTiesGoToTheFirstDetected(t *testing.T) {
	ctx := context.Background()
	f := newFakeImages(1000).add("old", 300).add("pad", 600)
	f.pin("pad")
	gc, clk, _ := newGC(t, f, defaultPolicy)
	_, err := gc.detectImages(ctx, clk.Now())
	require.NoError(t, err)
	clk.Step(time.Minute)
	f.add("new", 50) // never used either, detected later: 95 % full
	_, err = gc.detectImages(ctx, clk.Now())
	require.NoError(t, err)
	clk.Step(5 * time.Minute)

	require.NoError(t, gc.GarbageCollect(ctx, t0))
	assert.Equal(t, []string{"old"}, f.removed, "300 bytes were enough")
}

func TestGarbageCollectKeepsImagesInUseAndPinnedAndSaysFreeDiskSpaceFailed(t *testing.T) {
	ctx := context.Background()
	f := newFakeImages(1000).add("pause", 400).add("web", 500)
	f.pin("pause")
	f.use("web")
	gc, clk, rec := newGC(t, f, defaultPolicy)
	clk.Step(time.Hour)

	err := gc.GarbageCollect(ctx, t0)
	require.EqualError(t, err, "Failed to garbage collect required amount of images. Attempted to free 100 bytes, but only found 0 bytes eligible to free.")
	assert.Empty(t, f.removed)
	assert.Equal(t, []string{"Warning FreeDiskSpaceFailed " + err.Error()}, drain(rec))
}

func TestGarbageCollectRespectsMinAge(t *testing.T) {
	ctx := context.Background()
	f := newFakeImages(1000).add("a", 900)
	gc, clk, rec := newGC(t, f, defaultPolicy)
	_, err := gc.detectImages(ctx, clk.Now()) // first seen at t0
	require.NoError(t, err)

	clk.Step(2*time.Minute - time.Second)
	require.Error(t, gc.GarbageCollect(ctx, t0), "younger than MinAge (2 min): kept")
	assert.Empty(t, f.removed)
	assert.Len(t, drain(rec), 1)

	clk.Step(time.Second)
	require.NoError(t, gc.GarbageCollect(ctx, t0))
	assert.Equal(t, []string{"a"}, f.removed)
}

func TestGarbageCollectDeletesImagesUnusedForMaxAgeWhateverTheDisk(t *testing.T) {
	ctx := context.Background()
	f := newFakeImages(1000).add("stale", 100).add("recent", 100) // 20 %: no pressure
	gc, clk, _ := newGC(t, f, ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: 10 * time.Minute})
	began := clk.Now()
	f.use("stale", "recent")
	_, err := gc.detectImages(ctx, clk.Now()) // both used at t0
	require.NoError(t, err)
	clk.Step(5 * time.Minute)
	f.use("recent")
	_, err = gc.detectImages(ctx, clk.Now()) // recent used at t0+5m
	require.NoError(t, err)
	f.use()

	// MaxAge has not passed since the collection began: nothing by age.
	clk.Step(5 * time.Minute)
	require.NoError(t, gc.GarbageCollect(ctx, began))
	assert.Empty(t, f.removed)

	// t0+11m: stale unused for 11 min, recent for 6.
	clk.Step(time.Minute)
	require.NoError(t, gc.GarbageCollect(ctx, began))
	assert.Equal(t, []string{"stale"}, f.removed)
	clk.Step(5 * time.Minute)
	require.NoError(t, gc.GarbageCollect(ctx, began))
	assert.Equal(t, []string{"stale", "recent"}, f.removed)
}

// The sandbox image, which the runtime pins, outlives MaxAge too: no path
// of the collection removes a pinned image.
func TestGarbageCollectByMaxAgeKeepsThePinnedSandboxImage(t *testing.T) {
	ctx := context.Background()
	f := newFakeImages(1000).add("pause", 1).add("stale", 100)
	f.pin("pause")
	gc, clk, _ := newGC(t, f, ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: 10 * time.Minute})
	began := clk.Now()
	_, err := gc.detectImages(ctx, clk.Now())
	require.NoError(t, err)
	clk.Step(time.Hour)
	require.NoError(t, gc.GarbageCollect(ctx, began))
	assert.Equal(t, []string{"stale"}, f.removed)
	assert.Equal(t, []string{"pause"}, f.left())
}

func TestGarbageCollectWithoutCapacityIsInvalidDiskCapacity(t *testing.T) {
	f := newFakeImages(0).add("a", 10)
	gc, _, rec := newGC(t, f, defaultPolicy)
	require.EqualError(t, gc.GarbageCollect(context.Background(), t0), "invalid capacity 0 on image filesystem")
	assert.Equal(t, []string{"Warning InvalidDiskCapacity invalid capacity 0 on image filesystem"}, drain(rec))
}

func TestGarbageCollectGoesOnPastAFailedRemoval(t *testing.T) {
	f := newFakeImages(1000).add("a", 900)
	gc, clk, _ := newGC(t, f, defaultPolicy)
	clk.Step(time.Hour)
	_, err := gc.detectImages(context.Background(), t0)
	require.NoError(t, err)
	f.removeErr = errors.New("image is busy")
	err = gc.GarbageCollect(context.Background(), t0)
	require.ErrorContains(t, err, "wanted to free 100 bytes, but freed 0 bytes space with errors in image deletion")
	require.ErrorContains(t, err, "image is busy")
}

func TestDeleteUnusedImagesDeletesEveryUnusedImagePastMinAge(t *testing.T) {
	ctx := context.Background()
	f := newFakeImages(1<<30).add("a", 10).add("b", 10).add("web", 10).add("pause", 1).add("fresh", 10)
	f.pin("pause")
	f.use("web")
	gc, clk, _ := newGC(t, f, defaultPolicy)
	_, err := gc.detectImages(ctx, clk.Now())
	require.NoError(t, err)
	clk.Step(time.Minute)
	f.add("fresh2", 10)
	clk.Step(time.Minute + 30*time.Second) // a, b, fresh: 2.5 min old; fresh2: 1.5 min

	require.NoError(t, gc.DeleteUnusedImages(ctx))
	assert.ElementsMatch(t, []string{"a", "b", "fresh"}, f.removed, "the disk is nearly empty: all the same")
	assert.Equal(t, []string{"fresh2", "pause", "web"}, f.left())
}

func TestNewImageGCManagerChecksThePolicy(t *testing.T) {
	f := newFakeImages(1)
	for policy, want := range map[ImageGCPolicy]string{
		{HighThresholdPercent: 101}:                         "invalid HighThresholdPercent 101, must be in range [0-100]",
		{HighThresholdPercent: 90, LowThresholdPercent: -1}: "invalid LowThresholdPercent -1, must be in range [0-100]",
		{HighThresholdPercent: 80, LowThresholdPercent: 85}: "LowThresholdPercent 85 can not be higher than HighThresholdPercent 80",
	} {
		_, err := NewImageGCManager(f, f, f, nil, nodeRef, policy, nil)
		assert.EqualError(t, err, want)
	}
	_, err := NewImageGCManager(nil, f, f, nil, nodeRef, defaultPolicy, nil)
	assert.Error(t, err)
}

func TestRunDetectsImagesAndKeepsTheListLargestFirst(t *testing.T) {
	f := newFakeImages(1000).add("small", 10).add("big", 500)
	gc, clk, _ := newGC(t, f, defaultPolicy)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gc.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// Run detects and lists at once, then waits on its two timers.
	require.Eventually(t, func() bool { return clk.HasWaiters() }, 10*time.Second, time.Millisecond)
	list, err := gc.GetImageList()
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, "big", list[0].ID)
	assert.Equal(t, int64(500), list[0].Size)
	gc.mu.Lock()
	assert.Equal(t, t0, gc.imageRecords["small"].firstDetected)
	gc.mu.Unlock()

	// 30 s later the list is refreshed.
	f.add("huge", 900)
	clk.Step(ImageListCachePeriod)
	require.Eventually(t, func() bool {
		list, _ := gc.GetImageList()
		return len(list) == 3 && list[0].ID == "huge"
	}, 10*time.Second, time.Millisecond)
}
