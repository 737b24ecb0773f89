package testcluster_test

import (
	"os"
	"testing"

	"mykubelet/scripts/testkit/testcluster"
)

// BenchmarkStart measures how long a fresh control plane (new certificates,
// empty etcd) takes from nothing to ready: /readyz ok, both controllers
// healthy, the default service account made. Binaries are already built.
//
//	go test -run '^$' -bench Start -benchtime 3x ./scripts/testkit/testcluster
func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		dir, err := os.MkdirTemp("", "mykubelet-bench-")
		if err != nil {
			b.Fatal(err)
		}
		c, err := testcluster.New(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		c.Stop()
		os.RemoveAll(dir)
		b.StartTimer()
	}
}
