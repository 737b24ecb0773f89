// Package stats is upstream's pkg/kubelet/stats and the summary API of
// pkg/kubelet/server/stats: the node's and its pods' figures, read from
// the container runtime (CRI stats) and the node, in the published types
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1) that /stats/summary serves.
package stats

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// VolumeInfo is one mounted volume of a pod: its name in the pod and its
// directory on the node.
type VolumeInfo struct {
	Name string
	Path string
}

// Config is what NewProvider needs.
type Config struct {
	// NodeName names the node in the summary. Required.
	NodeName string
	// Runtime and Images are the CRI clients. Required.
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	// Pods are the pods the kubelet runs (the pod manager's GetPods).
	// Required.
	Pods func() []*v1.Pod
	// Volumes are a pod's mounted volumes; nil: none are reported.
	Volumes func(uid types.UID) []VolumeInfo
	// RootDirectory (nodefs) and PodLogsDirectory are measured on disk.
	RootDirectory, PodLogsDirectory string
	// MemoryCapacity is the node's memory in bytes (the node status's
	// capacity). Required.
	MemoryCapacity func() int64
	// Clock: nil is the real clock.
	Clock clock.Clock
}

// Provider builds summaries (upstream's SummaryProvider).
type Provider struct{ cfg Config }

// NewProvider checks cfg.
func NewProvider(cfg Config) (*Provider, error) {
	if cfg.NodeName == "" || cfg.Runtime == nil || cfg.Images == nil || cfg.Pods == nil || cfg.MemoryCapacity == nil {
		return nil, errors.New("stats: Config needs NodeName, Runtime, Images, Pods and MemoryCapacity")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Provider{cfg: cfg}, nil
}

// Get is the whole summary (/stats/summary); updateStats is upstream's
// (asks for fresh figures).
func (p *Provider) Get(ctx context.Context, updateStats bool) (*statsapi.Summary, error) {
	return nil, errors.New("stats: not built yet")
}

// GetCPUAndMemoryStats is the summary with CPU and memory only
// (/metrics/resource).
func (p *Provider) GetCPUAndMemoryStats(ctx context.Context) (*statsapi.Summary, error) {
	return nil, errors.New("stats: not built yet")
}
