package nodestatus

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/images"
)

// Upstream's limits on status.images.
const (
	// DefaultNodeStatusMaxImages is the KubeletConfiguration's
	// nodeStatusMaxImages default (--node-status-max-images): at most 50
	// images in status.images; -1 means no cap, 0 no images.
	DefaultNodeStatusMaxImages = 50
	// MaxNamesPerImageInNodeStatus is how many names (digests, then tags)
	// status.images gives an image at most.
	MaxNamesPerImageInNodeStatus = 5
)

// Images sets status.images to the images imageListFunc returns, which
// must be sorted largest first (the image GC manager's GetImageList is):
// the first nodeStatusMaxImages of them (all with -1), each with its repo
// digests then its repo tags, at most MaxNamesPerImageInNodeStatus names,
// and its size. When the list cannot be had, status.images is emptied and
// the error returned, as upstream.
func Images(nodeStatusMaxImages int32, imageListFunc func(ctx context.Context) ([]images.Image, error)) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		list, err := imageListFunc(ctx)
		if err != nil {
			node.Status.Images = nil
			return fmt.Errorf("node %s: image list: %w", node.Name, err)
		}
		if nodeStatusMaxImages > -1 && int(nodeStatusMaxImages) < len(list) {
			list = list[:nodeStatusMaxImages]
		}
		var out []v1.ContainerImage
		for _, img := range list {
			names := make([]string, 0, len(img.RepoDigests)+len(img.RepoTags))
			names = append(names, img.RepoDigests...)
			names = append(names, img.RepoTags...)
			if len(names) > MaxNamesPerImageInNodeStatus {
				names = names[:MaxNamesPerImageInNodeStatus]
			}
			out = append(out, v1.ContainerImage{Names: names, SizeBytes: img.Size})
		}
		node.Status.Images = out
		return nil
	}
}
