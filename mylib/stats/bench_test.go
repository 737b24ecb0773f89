package stats

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/stats/statstest"
)

// benchFixture is a node at the default max-pods (110): each pod runs one
// container and has an emptyDir holding a 4 KiB file and a 4 KiB log.
func benchFixture(b *testing.B) *Provider {
	f := newFixture(b)
	for i := range 110 {
		pod := newPod("default", fmt.Sprintf("pod-%03d", i),
			v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
		dir := filepath.Join(f.root, "pods", string(pod.UID), "volumes", "scratch")
		writeFile(b, filepath.Join(dir, "data"), 4096)
		writeFile(b, filepath.Join(f.logs, "default_"+pod.Name+"_"+string(pod.UID), "app", "0.log"), 4096)
		f.volumes[pod.UID] = []VolumeInfo{{Name: "scratch", Path: dir}}
		f.addPod(pod, statstest.Container{Name: "app", CPU: 1e9, WorkingSet: 8 << 20, Rootfs: f.root, RootfsBytes: 4096, RootfsInodes: 2})
	}
	return f.provider(b)
}

// BenchmarkGet110Pods is one /stats/summary: the runtime's figures, and
// on disk each pod's volume and logs.
func BenchmarkGet110Pods(b *testing.B) {
	p := benchFixture(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.Get(ctx, false)
		if err != nil || len(s.Pods) != 110 {
			b.Fatal(err, len(s.Pods))
		}
	}
}

// BenchmarkGetCPUAndMemoryStats110Pods is what a /metrics/resource
// scrape asks of the provider.
func BenchmarkGetCPUAndMemoryStats110Pods(b *testing.B) {
	p := benchFixture(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.GetCPUAndMemoryStats(ctx)
		if err != nil || len(s.Pods) != 110 {
			b.Fatal(err, len(s.Pods))
		}
	}
}
