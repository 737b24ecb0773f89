package app

// What KubeletServer.Eviction turns on, from the command line: upstream's
// eviction, image GC and image pull flags (mylib/kubeletconfig's, the same
// code as the capstone's), and the course's mock machine a learner can
// fill.

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/images"
	"mykubelet/mylib/kubeletconfig"
	"mykubelet/mylib/options"
)

// MockMachineFlags are the course's own flags (upstream's kubelet has
// none): the mock machine's size, and how often unused images are
// collected, a constant upstream (images.ImageGCPeriod).
type MockMachineFlags struct {
	// MockMachine is --fake-memory-capacity, --fake-nodefs-capacity and
	// --fake-imagefs-capacity, in bytes; zero: the host's.
	MockMachine cadvisor.MockMachine
	// ImageGCPeriod is --image-gc-period.
	ImageGCPeriod time.Duration
}

// AddMockMachineFlags registers the course's node pressure flags on fs:
// --fake-memory-capacity, --fake-nodefs-capacity, --fake-imagefs-capacity
// (quantities such as 1Gi or 500Mi) and --image-gc-period.
func AddMockMachineFlags(fs *flag.FlagSet) *MockMachineFlags {
	m := &MockMachineFlags{ImageGCPeriod: images.ImageGCPeriod}
	fs.Var(&quantityFlag{&m.MockMachine.MemoryCapacity}, "fake-memory-capacity",
		"the mock machine's memory (e.g. 1Gi): the node's memory capacity, used by the pods' working sets alone (the course's flag; default: the host's)")
	fs.Var(&quantityFlag{&m.MockMachine.NodeFsCapacity}, "fake-nodefs-capacity",
		"the mock machine's node filesystem (e.g. 2Gi): the node's ephemeral-storage capacity, used by the containers' writable layers, logs and emptyDirs (the course's flag; default: the host's)")
	fs.Var(&quantityFlag{&m.MockMachine.ImageFsCapacity}, "fake-imagefs-capacity",
		"the mock machine's image filesystem (e.g. 500Mi), used by the images' sizes (the course's flag; default: the host's)")
	fs.Var(&periodFlag{&m.ImageGCPeriod}, "image-gc-period",
		"how often unused images are collected by --image-gc-high-threshold (the course's flag: upstream's is a constant)")
	return m
}

// Apply sets what the flags say on s.
func (m *MockMachineFlags) Apply(s *KubeletServer) {
	s.MockMachine = m.MockMachine
	s.ImageGCPeriod = m.ImageGCPeriod
}

// NodePressureFlags are a chapter program's node pressure flags:
// upstream's (kubeletconfig.AddNodePressureFlags: --eviction-hard,
// --eviction-soft, --image-gc-high-threshold, --serialize-image-pulls…)
// and the course's (AddMockMachineFlags).
type NodePressureFlags struct {
	config *kubeletconfig.PressureFlags
	*MockMachineFlags
}

// AddNodePressureFlags registers the node pressure flags on o's flag set.
// After o.Parse, Apply sets them on the KubeletServer.
func AddNodePressureFlags(o *options.Options) *NodePressureFlags {
	return &NodePressureFlags{config: kubeletconfig.AddNodePressureFlags(o.Flags), MockMachineFlags: AddMockMachineFlags(o.Flags)}
}

// Apply sets the flags given over s.KubeletConfiguration's node pressure
// fields (upstream's defaults for those it leaves unset), checks them
// (kubeletconfig.ValidateNodePressure), and turns the eviction manager and
// the image GC manager on (s.Eviction) over the mock machine the flags
// describe.
func (p *NodePressureFlags) Apply(s *KubeletServer) error {
	kc := s.KubeletConfiguration
	if kc == nil {
		return errors.New("node pressure flags: the KubeletServer has no KubeletConfiguration")
	}
	kubeletconfig.SetNodePressureDefaults(kc)
	p.config.ApplyTo(kc)
	if err := kubeletconfig.ValidateNodePressure(kc); err != nil {
		return fmt.Errorf("node pressure flags: %w", err)
	}
	p.MockMachineFlags.Apply(s)
	s.Eviction = true
	return nil
}

// quantityFlag is a size in bytes given as a quantity (1Gi, 500Mi,
// 2000000); 0 (the default) means the host's figure.
type quantityFlag struct{ bytes *int64 }

func (f *quantityFlag) String() string {
	if f == nil || f.bytes == nil || *f.bytes == 0 {
		return ""
	}
	return resource.NewQuantity(*f.bytes, resource.BinarySI).String()
}

func (f *quantityFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return fmt.Errorf("want a size such as 1Gi or 500Mi, got %q", s)
	}
	*f.bytes = q.Value()
	return nil
}

// periodFlag is a positive duration.
type periodFlag struct{ d *time.Duration }

func (f *periodFlag) String() string {
	if f == nil || f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f *periodFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration such as 30s or 5m, got %q", s)
	}
	*f.d = d
	return nil
}
