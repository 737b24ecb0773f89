package images

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
)

// imageRecord is what the manager knows of one image.
type imageRecord struct {
	// firstDetected: when detectImages first saw it (MinAge counts from
	// there: a fresh pull is about to be used).
	firstDetected time.Time
	// lastUsed: the last detectImages that saw a container use it.
	lastUsed time.Time
	size     int64
	pinned   bool
}

// evictionInfo is an image in the order it would be deleted.
type evictionInfo struct {
	id string
	imageRecord
}

type realImageGCManager struct {
	images        runtimeapi.ImageServiceClient
	runtime       kubecontainer.Runtime
	statsProvider StatsProvider
	recorder      record.EventRecorder // nil drops the events
	nodeRef       *v1.ObjectReference
	policy        ImageGCPolicy
	clock         clock.Clock

	mu           sync.Mutex
	imageRecords map[string]*imageRecord // by image ID

	cacheMu    sync.Mutex
	imageCache []Image
}

var _ ImageGCManager = &realImageGCManager{}

// NewImageGCManager returns the image GC manager: it lists images through
// the CRI image service (and removes them there, so `crictl images` shows
// them gone), learns which ones containers use from runtime.GetPods, and
// reads the image filesystem's fill from statsProvider. The policy is
// checked as upstream: thresholds in [0, 100], low not above high.
func NewImageGCManager(images runtimeapi.ImageServiceClient, runtime kubecontainer.Runtime, statsProvider StatsProvider,
	recorder record.EventRecorder, nodeRef *v1.ObjectReference, policy ImageGCPolicy, clk clock.Clock) (ImageGCManager, error) {
	if images == nil || runtime == nil || statsProvider == nil {
		return nil, errors.New("images: NewImageGCManager needs the image service, the runtime and the stats provider")
	}
	if policy.HighThresholdPercent < 0 || policy.HighThresholdPercent > 100 {
		return nil, fmt.Errorf("invalid HighThresholdPercent %d, must be in range [0-100]", policy.HighThresholdPercent)
	}
	if policy.LowThresholdPercent < 0 || policy.LowThresholdPercent > 100 {
		return nil, fmt.Errorf("invalid LowThresholdPercent %d, must be in range [0-100]", policy.LowThresholdPercent)
	}
	if policy.LowThresholdPercent > policy.HighThresholdPercent {
		return nil, fmt.Errorf("LowThresholdPercent %d can not be higher than HighThresholdPercent %d", policy.LowThresholdPercent, policy.HighThresholdPercent)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &realImageGCManager{
		images: images, runtime: runtime, statsProvider: statsProvider,
		recorder: recorder, nodeRef: nodeRef, policy: policy, clock: clk,
		imageRecords: map[string]*imageRecord{},
	}, nil
}

func (im *realImageGCManager) event(eventType, reason, message string) {
	if im.recorder != nil && im.nodeRef != nil {
		im.recorder.Event(im.nodeRef, eventType, reason, message)
	}
}

// Run detects the images at once and every DetectImagesPeriod, and
// refreshes GetImageList's list at once and every ImageListCachePeriod,
// until ctx ends (upstream's Start, whose two loops never end).
func (im *realImageGCManager) Run(ctx context.Context) {
	detect := func() {
		if _, err := im.detectImages(ctx, im.clock.Now()); err != nil {
			klog.InfoS("Failed to monitor images", "err", err)
		}
	}
	detect()
	im.updateImageCache(ctx)
	detectTimer := im.clock.NewTimer(DetectImagesPeriod)
	defer detectTimer.Stop()
	cacheTimer := im.clock.NewTimer(ImageListCachePeriod)
	defer cacheTimer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-detectTimer.C():
			detect()
			detectTimer.Reset(DetectImagesPeriod)
		case <-cacheTimer.C():
			im.updateImageCache(ctx)
			cacheTimer.Reset(ImageListCachePeriod)
		}
	}
}

func (im *realImageGCManager) updateImageCache(ctx context.Context) {
	list, err := im.listImages(ctx)
	if err != nil {
		klog.InfoS("Failed to update image list", "err", err)
		return
	}
	// Largest first, as upstream's cache (sliceutils.ByImageSize): the
	// node status lists the biggest images.
	sort.SliceStable(list, func(i, j int) bool { return list[i].Size > list[j].Size })
	im.cacheMu.Lock()
	im.imageCache = list
	im.cacheMu.Unlock()
}

// GetImageList returns the images as last listed; the caller must not
// change the slice.
func (im *realImageGCManager) GetImageList() ([]Image, error) {
	im.cacheMu.Lock()
	defer im.cacheMu.Unlock()
	return im.imageCache, nil
}

// listImages is the CRI's ListImages in this package's type.
func (im *realImageGCManager) listImages(ctx context.Context) ([]Image, error) {
	resp, err := im.images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListImages: %w", err)
	}
	list := make([]Image, 0, len(resp.GetImages()))
	for _, img := range resp.GetImages() {
		list = append(list, Image{ID: img.GetId(), RepoTags: img.GetRepoTags(), RepoDigests: img.GetRepoDigests(),
			Size: int64(img.GetSize()), Pinned: img.GetPinned()})
	}
	return list, nil
}

// detectImages lists the images and the containers (dead ones too: an
// image a stopped container was made from is in use), records new images
// as first seen at detectTime, marks the used ones used now, and forgets
// images that are gone. It returns the IDs in use.
func (im *realImageGCManager) detectImages(ctx context.Context, detectTime time.Time) (map[string]bool, error) {
	list, err := im.listImages(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := im.runtime.GetPods(ctx, true)
	if err != nil {
		return nil, err
	}
	inUse := map[string]bool{}
	for _, pod := range pods {
		for _, c := range pod.Containers {
			klog.V(5).InfoS("Container uses image", "pod", klog.KRef(pod.Namespace, pod.Name), "containerName", c.Name, "containerImage", c.Image, "imageID", c.ImageID)
			inUse[c.ImageID] = true
		}
	}

	now := im.clock.Now()
	im.mu.Lock()
	defer im.mu.Unlock()
	current := map[string]bool{}
	for _, img := range list {
		current[img.ID] = true
		rec, ok := im.imageRecords[img.ID]
		if !ok {
			klog.V(5).InfoS("Image ID is new", "imageID", img.ID)
			rec = &imageRecord{firstDetected: detectTime}
			im.imageRecords[img.ID] = rec
		}
		if inUse[img.ID] {
			rec.lastUsed = now
		}
		rec.size, rec.pinned = img.Size, img.Pinned
	}
	for id := range im.imageRecords {
		if !current[id] {
			klog.V(5).InfoS("Image ID is no longer present; removing from imageRecords", "imageID", id)
			delete(im.imageRecords, id)
		}
	}
	return inUse, nil
}

// imagesInEvictionOrder detects the images and returns those no container
// uses and the runtime did not pin, least recently used first, then first
// detected first.
func (im *realImageGCManager) imagesInEvictionOrder(ctx context.Context, freeTime time.Time) ([]evictionInfo, error) {
	inUse, err := im.detectImages(ctx, freeTime)
	if err != nil {
		return nil, err
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	var out []evictionInfo
	for id, rec := range im.imageRecords {
		if inUse[id] {
			klog.V(5).InfoS("Image ID is being used", "imageID", id)
			continue
		}
		if rec.pinned {
			klog.V(5).InfoS("Image is pinned, skipping garbage collection", "imageID", id)
			continue
		}
		out = append(out, evictionInfo{id: id, imageRecord: *rec})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].lastUsed.Equal(out[j].lastUsed) {
			return out[i].lastUsed.Before(out[j].lastUsed)
		}
		if !out[i].firstDetected.Equal(out[j].firstDetected) {
			return out[i].firstDetected.Before(out[j].firstDetected)
		}
		return out[i].id < out[j].id // a stable order for equal records
	})
	return out, nil
}

// GarbageCollect deletes the images unused for more than MaxAge (once
// MaxAge has passed since beganGC), then, if the image filesystem is at
// least HighThresholdPercent full, unused images old enough until it is
// down to LowThresholdPercent. Not reaching it is an error and a
// FreeDiskSpaceFailed event on the node.
func (im *realImageGCManager) GarbageCollect(ctx context.Context, beganGC time.Time) error {
	freeTime := im.clock.Now()
	candidates, err := im.imagesInEvictionOrder(ctx, freeTime)
	if err != nil {
		return err
	}
	candidates, err = im.freeOldImages(ctx, candidates, freeTime, beganGC)
	if err != nil {
		return err
	}

	fsStats, _, err := im.statsProvider.ImageFsStats(ctx)
	if err != nil {
		return err
	}
	var capacity, available int64
	if fsStats != nil && fsStats.CapacityBytes != nil {
		capacity = int64(*fsStats.CapacityBytes)
	}
	if fsStats != nil && fsStats.AvailableBytes != nil {
		available = int64(*fsStats.AvailableBytes)
	}
	if available > capacity {
		klog.InfoS("Availability is larger than capacity", "available", available, "capacity", capacity)
		available = capacity
	}
	if capacity == 0 {
		err := errors.New("invalid capacity 0 on image filesystem")
		im.event(v1.EventTypeWarning, InvalidDiskCapacity, err.Error())
		return err
	}

	usagePercent := 100 - int(available*100/capacity)
	if usagePercent < im.policy.HighThresholdPercent {
		return nil
	}
	amountToFree := capacity*int64(100-im.policy.LowThresholdPercent)/100 - available
	klog.InfoS("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		"usage", usagePercent, "highThreshold", im.policy.HighThresholdPercent, "amountToFree", amountToFree, "lowThreshold", im.policy.LowThresholdPercent)
	freed, err := im.freeSpace(ctx, amountToFree, freeTime, candidates)
	if err != nil {
		return err
	}
	if freed < amountToFree {
		err := fmt.Errorf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", amountToFree, freed) // upstream's message, capital and full stop included
		im.event(v1.EventTypeWarning, FreeDiskSpaceFailed, err.Error())
		return err
	}
	return nil
}

// freeOldImages deletes the candidates unused for more than MaxAge and
// returns the others. Nothing goes before MaxAge has passed since beganGC:
// a kubelet just started has not yet seen which images are used.
func (im *realImageGCManager) freeOldImages(ctx context.Context, candidates []evictionInfo, freeTime, beganGC time.Time) ([]evictionInfo, error) {
	if im.policy.MaxAge == 0 || freeTime.Sub(beganGC) <= im.policy.MaxAge {
		return candidates, nil
	}
	var errs []error
	var remaining []evictionInfo
	for _, img := range candidates {
		klog.V(5).InfoS("Evaluating image ID for possible garbage collection based on image age", "imageID", img.id)
		if freeTime.Sub(img.lastUsed) <= im.policy.MaxAge {
			remaining = append(remaining, img)
			continue
		}
		if err := im.freeImage(ctx, img); err != nil {
			errs = append(errs, err)
			remaining = append(remaining, img)
		}
	}
	if len(errs) > 0 {
		return remaining, fmt.Errorf("wanted to free images older than %v, encountered errors in image deletion: %w", im.policy.MaxAge, errors.Join(errs...))
	}
	return remaining, nil
}

// DeleteUnusedImages deletes every unused, unpinned image older than
// MinAge (the eviction manager's reclaim).
func (im *realImageGCManager) DeleteUnusedImages(ctx context.Context) error {
	klog.InfoS("Attempting to delete unused images")
	freeTime := im.clock.Now()
	candidates, err := im.imagesInEvictionOrder(ctx, freeTime)
	if err != nil {
		return err
	}
	_, err = im.freeSpace(ctx, math.MaxInt64, freeTime, candidates)
	return err
}

// freeSpace deletes candidates in order until bytesToFree are freed,
// skipping images used at freeTime and images younger than MinAge, and
// going on past a failed deletion. It returns what it freed.
func (im *realImageGCManager) freeSpace(ctx context.Context, bytesToFree int64, freeTime time.Time, candidates []evictionInfo) (int64, error) {
	var errs []error
	var freed int64
	for _, img := range candidates {
		klog.V(5).InfoS("Evaluating image ID for possible garbage collection based on disk usage", "imageID", img.id)
		if !img.lastUsed.Before(freeTime) {
			klog.V(5).InfoS("Image ID was used too recently, not eligible for garbage collection", "imageID", img.id, "lastUsed", img.lastUsed, "freeTime", freeTime)
			continue
		}
		if age := freeTime.Sub(img.firstDetected); age < im.policy.MinAge {
			klog.V(5).InfoS("Image ID's age is less than the policy's minAge, not eligible for garbage collection", "imageID", img.id, "age", age, "minAge", im.policy.MinAge)
			continue
		}
		if err := im.freeImage(ctx, img); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += img.size
		if freed >= bytesToFree {
			break
		}
	}
	if len(errs) > 0 {
		return freed, fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w", bytesToFree, freed, errors.Join(errs...))
	}
	return freed, nil
}

// freeImage removes the image through the CRI and forgets it.
func (im *realImageGCManager) freeImage(ctx context.Context, img evictionInfo) error {
	klog.InfoS("Removing image to free bytes", "imageID", img.id, "size", img.size)
	if _, err := im.images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img.id}}); err != nil {
		return fmt.Errorf("RemoveImage %s: %w", img.id, err)
	}
	im.mu.Lock()
	delete(im.imageRecords, img.id)
	im.mu.Unlock()
	return nil
}
