package kubelet

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"mykubelet/mylib/config"
	"mykubelet/mylib/kubetypes"
)

// PodSources says where a kubelet's pods come from: what upstream's
// makePodSourceConfig reads from the KubeletConfiguration and its
// Dependencies.
type PodSources struct {
	// StaticPodPath is the directory of static pod manifests
	// (--pod-manifest-path, staticPodPath); "" means no file source.
	StaticPodPath string
	// FileCheckFrequency is how often the directory is listed again even
	// when nothing changed; zero means config.DefaultFileCheckFrequency.
	FileCheckFrequency time.Duration
	// Client adds the API server source, the pods bound to NodeName; nil
	// means none (a kubelet of static pods only).
	Client kubernetes.Interface
	// NodeName is the node the pods run on. Required.
	NodeName string
	// Clock is the sources' and PodConfig's clock. Required.
	Clock clock.WithTicker
}

// MakePodSourceConfig merges the pod sources into one PodConfig, as
// upstream's makePodSourceConfig (pkg/kubelet/kubelet.go): the file source
// if there is a static pod path, the API server source if there is a
// client. The sources run in wg until ctx ends; PodsConfig takes the
// result's Updates and SeenAllSources.
func MakePodSourceConfig(ctx context.Context, wg *sync.WaitGroup, s PodSources) (*config.PodConfig, error) {
	if s.NodeName == "" || s.Clock == nil {
		return nil, errors.New("kubelet: PodSources.NodeName and Clock are required")
	}
	podConfig := config.NewPodConfig(s.Clock)
	if s.StaticPodPath != "" {
		files, err := config.NewSourceFile(config.SourceFileConfig{Path: s.StaticPodPath, NodeName: s.NodeName,
			Period: s.FileCheckFrequency, Updates: podConfig.Channel(ctx, kubetypes.FileSource), Clock: s.Clock})
		if err != nil {
			return nil, err
		}
		wg.Go(func() { files.Run(ctx) })
	}
	if s.Client != nil {
		apiserver := config.NewSourceApiserver(s.Client, s.NodeName, podConfig.Channel(ctx, kubetypes.ApiserverSource))
		wg.Go(func() { apiserver.Run(ctx) })
	}
	return podConfig, nil
}
