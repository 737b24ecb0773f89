package fakeruntime

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SandboxImage is the image this runtime would start sandboxes from, as
// containerd 2.x's default configuration names it (pinned_images.sandbox):
// it is pinned (Image.Pinned) by whichever name it was pulled, so that the
// kubelet's image GC never removes it. (This runtime's sandboxes run no
// image; a pod may still pull it.)
const SandboxImage = "registry.k8s.io/pause:3.10"

// image is a pulled image: no layers, just its names, ID, size and the bits
// of its configuration the runtime uses.
type image struct {
	id          string // "sha256:<64 hex>"
	repoTags    []string
	repoDigests []string
	size        uint64
	user        string       // the configuration's USER; "" is root
	def         ImageDefault // what a container runs with no command
	entrypoint  []string     // KnownRepository.Entrypoint
	programs    []string     // KnownRepository.Programs
}

// normalizeRef turns "nginx" into "docker.io/library/nginx:latest", as
// container runtimes name images.
func normalizeRef(ref string) string {
	name, rest := ref, ""
	if i := strings.Index(ref, "@"); i >= 0 {
		name, rest = ref[:i], ref[i:]
	}
	first, _, hasSlash := strings.Cut(name, "/")
	if !hasSlash || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		if !hasSlash {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	lastSlash := strings.LastIndex(name, "/")
	if rest == "" && !strings.Contains(name[lastSlash+1:], ":") {
		name += ":latest"
	}
	return name + rest
}

// splitRef splits a normalized reference into its repository and its tag
// or digest (one of them is empty).
func splitRef(ref string) (repo, tag, digest string) {
	if r, d, ok := strings.Cut(ref, "@"); ok {
		return r, "", d
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:], ""
	}
	return ref, "", ""
}

// resolve says which image the normalized reference ref names, as a registry
// would: the catalogue's image (KnownImages) when it lists the tag or the
// digest, else one whose ID, digest and size (its repository's Size within
// 5%, or 2 MB to 200 MB) are made up from the name. The answer carries ref's own name only: a tag, and the
// repository@digest it resolves to.
func resolve(ref string) *image {
	repo, tag, digest := splitRef(ref)
	k := knownRepository(repo)
	var known *KnownImage
	if k != nil {
		for i, ki := range k.Images {
			if (tag != "" && slices.Contains(ki.Tags, tag)) || (digest != "" && digest == ki.Digest) {
				known = &k.Images[i]
				break
			}
		}
	}
	madeUpFrom := ref
	if known != nil {
		madeUpFrom = k.Names[0] + ":" + known.Tags[0] // one image, whatever name pulled it
	}
	sum := sha256.Sum256([]byte(madeUpFrom))
	madeUpDigest := sha256.Sum256(append([]byte("digest:"), sum[:]...))
	img := &image{
		id:   "sha256:" + hex.EncodeToString(sum[:]),
		size: 2_000_000 + binary.BigEndian.Uint64(sum[:8])%198_000_000,
		def:  UnknownImageDefault,
	}
	manifest := "sha256:" + hex.EncodeToString(madeUpDigest[:])
	if digest != "" {
		manifest = digest // a name@digest names its manifest
	}
	if k != nil {
		img.user, img.def, img.entrypoint, img.programs = k.User, k.Default, k.Entrypoint, k.Programs
		if k.Size != 0 { // the repository's size, within 5%
			img.size = k.Size / 100 * (95 + binary.BigEndian.Uint64(sum[8:16])%11)
		}
	}
	if known != nil {
		if known.ID != "" {
			img.id = known.ID
		}
		if known.Digest != "" {
			manifest = known.Digest
		}
		if known.Size != 0 {
			img.size = known.Size
		}
	}
	if tag != "" {
		img.repoTags = []string{ref}
	}
	img.repoDigests = []string{repo + "@" + manifest}
	return img
}

// findImage finds an image by ID, unique ID prefix, tag or digest. Caller
// holds mu.
func (r *Runtime) findImage(ref string) *image {
	if ref == "" {
		return nil
	}
	if img, ok := r.images[ref]; ok {
		return img
	}
	if id, ok := r.imageNames[ref]; ok {
		return r.images[id]
	}
	if id, ok := r.imageNames[normalizeRef(ref)]; ok {
		return r.images[id]
	}
	for _, img := range r.images { // an ID prefix, as `crictl rmi 3f2a` gives
		if strings.HasPrefix(img.id, ref) || strings.HasPrefix(img.id, "sha256:"+ref) {
			return img
		}
	}
	return nil
}

// pull stores the image ref names, or adds ref's names to it when another
// name already pulled it, as containerd does. Caller holds mu.
func (r *Runtime) pull(ref string) *image {
	if img, ok := r.images[ref]; ok { // an image ID
		return img
	}
	img := resolve(normalizeRef(ref))
	if have, ok := r.images[img.id]; ok {
		for _, t := range img.repoTags {
			if !slices.Contains(have.repoTags, t) {
				have.repoTags = append(have.repoTags, t)
			}
		}
		for _, d := range img.repoDigests {
			if !slices.Contains(have.repoDigests, d) {
				have.repoDigests = append(have.repoDigests, d)
			}
		}
		img = have
	}
	r.images[img.id] = img
	for _, n := range append(img.repoTags, img.repoDigests...) {
		r.imageNames[n] = img.id
	}
	return img
}

func (img *image) toAPI() *runtimeapi.Image {
	out := &runtimeapi.Image{
		Id:          img.id,
		RepoTags:    append([]string(nil), img.repoTags...),
		RepoDigests: append([]string(nil), img.repoDigests...),
		Size:        img.size,
		Spec:        &runtimeapi.ImageSpec{Image: img.id},
		Pinned:      slices.Contains(img.repoTags, SandboxImage),
	}
	// As containerd reads USER: the part before ":" is a uid if numeric,
	// else a user name; the group is not reported.
	if u, _, _ := strings.Cut(img.user, ":"); u != "" {
		if uid, err := strconv.ParseInt(u, 10, 64); err == nil {
			out.Uid = &runtimeapi.Int64Value{Value: uid}
		} else {
			out.Username = u
		}
	}
	return out
}

// pullTime is how long pulling img takes on the runtime's clock: a round
// trip to the registry to resolve the name, which every pull pays, and the
// image's bytes when it is not here yet.
func (r *Runtime) pullTime(img *image, present bool) time.Duration {
	d := r.pullLatency
	if !present && r.pullBandwidth > 0 {
		d += time.Duration(float64(img.size) / float64(r.pullBandwidth) * float64(time.Second))
	}
	return d
}

// errTagNotFound is containerd's answer for a tag the registry does not
// serve (its "manifest unknown"): NotFound, with the normalized name three
// times, as containerd 1.6 and 1.7 say it (2.x: "failed to resolve image:
// …: not found").
func errTagNotFound(name string) error {
	return status.Errorf(codes.NotFound, "failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", name, name, name)
}

// PullImage pulls an image: it appears after pullTime (Config.PullLatency
// and PullBandwidth; no time at all by default), unless the caller's
// context ends first, which leaves nothing pulled. A tag its catalogued
// repository does not publish (cri_image_tags.go) fails with NotFound
// after the round trip (PullLatency), as containerd's pull of a tag the
// registry does not know; an image already here by that name does not
// help, as containerd asks the registry every time.
func (r *Runtime) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "PullImage: image.image is empty")
	}
	name := normalizeRef(ref)
	repo, tag, _ := splitRef(name)
	if !published(knownRepository(repo), tag) {
		if err := r.waitPull(ctx, ref, r.pullLatency); err != nil {
			return nil, err
		}
		return nil, errTagNotFound(name)
	}
	want := resolve(name)
	r.mu.Lock()
	_, present := r.images[want.id]
	r.mu.Unlock()
	if err := r.waitPull(ctx, ref, r.pullTime(want, present)); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.PullImageResponse{ImageRef: r.pull(ref).id}, nil
}

// waitPull waits d on the runtime's clock, or until ctx ends: then the
// pull fails with DeadlineExceeded or Canceled.
func (r *Runtime) waitPull(ctx context.Context, ref string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := r.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		code := codes.Canceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = codes.DeadlineExceeded
		}
		return status.Errorf(code, "PullImage %s: %v", ref, ctx.Err())
	case <-timer.C():
		return nil
	}
}

// ListImages lists images (`crictl images`), optionally only the one the
// filter names.
func (r *Runtime) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &runtimeapi.ListImagesResponse{}
	if ref := req.GetFilter().GetImage().GetImage(); ref != "" {
		if img := r.findImage(ref); img != nil {
			resp.Images = append(resp.Images, img.toAPI())
		}
		return resp, nil
	}
	for _, img := range r.images {
		resp.Images = append(resp.Images, img.toAPI())
	}
	sort.Slice(resp.Images, func(i, j int) bool { return resp.Images[i].Id < resp.Images[j].Id })
	return resp, nil
}

// ImageStatus returns the image, or no image (and no error) when it is not
// present, as the CRI asks.
func (r *Runtime) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.findImage(req.GetImage().GetImage())
	if img == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: img.toAPI()}, nil
}

// RemoveImage removes the image; removing a missing image is not an error.
func (r *Runtime) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if img := r.findImage(req.GetImage().GetImage()); img != nil {
		delete(r.images, img.id)
		for _, n := range append(img.repoTags, img.repoDigests...) {
			delete(r.imageNames, n)
		}
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports the space the images use (`crictl imagefsinfo`),
// on the filesystem of the runtime's state directory (or, before it has
// one, the temporary directory it will make it in), as containerd's are on
// the filesystem of its root, /var/lib/containerd: a directory that
// exists on this machine, so that the kubelet finds the image
// filesystem's size (statfs), the host's, and its image GC and eviction
// can work out a percentage.
func (r *Runtime) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	imageFs := r.stateDir
	if imageFs == "" {
		imageFs = os.TempDir()
	}
	var used uint64
	for _, img := range r.images {
		used += img.size
	}
	ts := r.now()
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  ts,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: imageFs},
			UsedBytes:  &runtimeapi.UInt64Value{Value: used},
			InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(r.images)) * 1000},
		}},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  ts,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/" + RuntimeName + "/containers"},
			UsedBytes:  &runtimeapi.UInt64Value{Value: uint64(len(r.containers)) * 4096},
			InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(r.containers)) * 10},
		}},
	}, nil
}
