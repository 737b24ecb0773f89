package fakeruntime

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// image is a pulled image: no layers, just a name, an ID and a size.
type image struct {
	id          string // "sha256:<64 hex>"
	repoTags    []string
	repoDigests []string
	size        uint64
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

// newImage makes the image a pull of ref would give: an ID derived from the
// name and a plausible size between 2 MB and 200 MB.
func newImage(ref string) *image {
	sum := sha256.Sum256([]byte(ref))
	digest := sha256.Sum256(append([]byte("digest:"), sum[:]...))
	repo := ref
	if i := strings.LastIndexAny(ref, ":@"); i > strings.LastIndex(ref, "/") {
		repo = ref[:i]
	}
	img := &image{
		id:          "sha256:" + hex.EncodeToString(sum[:]),
		repoDigests: []string{repo + "@sha256:" + hex.EncodeToString(digest[:])},
		size:        2_000_000 + binary.BigEndian.Uint64(sum[:8])%198_000_000,
	}
	if !strings.Contains(ref, "@") {
		img.repoTags = []string{ref}
	}
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

// pull adds the image named ref, if missing. Caller holds mu.
func (r *Runtime) pull(ref string) *image {
	if img := r.findImage(ref); img != nil {
		return img
	}
	img := newImage(normalizeRef(ref))
	r.images[img.id] = img
	for _, n := range append(img.repoTags, img.repoDigests...) {
		r.imageNames[n] = img.id
	}
	return img
}

func (img *image) toAPI() *runtimeapi.Image {
	return &runtimeapi.Image{
		Id:          img.id,
		RepoTags:    append([]string(nil), img.repoTags...),
		RepoDigests: append([]string(nil), img.repoDigests...),
		Size:        img.size,
		Spec:        &runtimeapi.ImageSpec{Image: img.id},
	}
}

// PullImage "pulls" an image: it appears at once, with a made-up size.
func (r *Runtime) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "PullImage: image.image is empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.PullImageResponse{ImageRef: r.pull(ref).id}, nil
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

// ImageFsInfo reports the space the images use (`crictl imagefsinfo`).
func (r *Runtime) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var used uint64
	for _, img := range r.images {
		used += img.size
	}
	ts := r.now()
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  ts,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/" + RuntimeName + "/images"},
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
