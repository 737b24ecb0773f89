package stats

import (
	"context"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/stats/statstest"
)

func TestTheMockMachinesMemoryIsThePodsOnly(t *testing.T) {
	f := newFixture(t)
	f.cfg.MockMachine = cadvisor.MockMachine{MemoryCapacity: 200 * mib}
	f.cfg.MemoryCapacity = func() int64 { return 64 * gib } // the host's: not the mock's
	f.addPod(newPod("default", "web"), statstest.Container{Name: "app", CPU: 1, WorkingSet: 10 * mib})
	f.addPod(newPod("default", "db"), statstest.Container{Name: "db", CPU: 1, WorkingSet: 100 * mib})
	p := f.provider(t)

	for name, get := range map[string]func(context.Context) (*statsapi.Summary, error){
		"Get":                  func(ctx context.Context) (*statsapi.Summary, error) { return p.Get(ctx, false) },
		"GetCPUAndMemoryStats": p.GetCPUAndMemoryStats,
	} {
		s, err := get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		m := s.Node.Memory
		wantVal(t, name+": node working set (the pods', not the kubelet's 50 MiB)", m.WorkingSetBytes, 110*mib)
		wantVal(t, name+": node usage", m.UsageBytes, 110*mib)
		wantVal(t, name+": node available (200 MiB - 110 MiB)", m.AvailableBytes, 90*mib)
		for _, c := range s.Node.SystemContainers {
			if c.Name == statsapi.SystemContainerKubelet {
				wantVal(t, name+": the kubelet is still reported", c.Memory.WorkingSetBytes, 50*mib)
			}
		}
	}

	// The pods grow past the mock's memory: nothing is left, not less.
	f.rt.Update("sandbox-db-uid", func(s *statstest.Sandbox) { s.Containers[0].WorkingSet = 300 * mib })
	s, err := p.Get(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "node working set", s.Node.Memory.WorkingSetBytes, 310*mib)
	wantVal(t, "node available", s.Node.Memory.AvailableBytes, 0)
}

func TestTheMockMachinesNodefsIsUsedByThePodsEphemeralStorage(t *testing.T) {
	f := newFixture(t)
	f.cfg.MockMachine = cadvisor.MockMachine{NodeFsCapacity: gib}
	pod := newPod("shop", "cart",
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "cart-data"}}})
	scratch, data := filepath.Join(f.root, "pods", "cart-uid", "volumes", "scratch"), t.TempDir()
	writeFile(t, filepath.Join(scratch, "a"), 100_000)
	writeFile(t, filepath.Join(data, "big"), 1_000_000) // a PVC: not the node's disk
	f.volumes[pod.UID] = []VolumeInfo{{Name: "data", Path: data}, {Name: "scratch", Path: scratch}}
	cartLogs := filepath.Join(f.logs, "shop_cart_cart-uid")
	writeFile(t, filepath.Join(cartLogs, "app", "0.log"), 20_000)
	writeFile(t, filepath.Join(cartLogs, "old", "0.log"), 30_000) // a dead container's
	writeFile(t, filepath.Join(f.root, "pods", "cart-uid", "etc-hosts"), 200)
	f.addPod(pod,
		statstest.Container{Name: "app", CPU: 1, Rootfs: f.root, RootfsBytes: 7_000, RootfsInodes: 3},
		statstest.Container{Name: "old", State: runtimeapi.ContainerState_CONTAINER_EXITED, Rootfs: f.root, RootfsBytes: 5_000, RootfsInodes: 2})
	// A deleted pod (the kubelet knows it no more) whose dead container is
	// not removed yet: its layer and logs still take the node's disk.
	gone := newPod("shop", "gone")
	goneLogs := filepath.Join(f.logs, "shop_gone_gone-uid")
	writeFile(t, filepath.Join(goneLogs, "x", "0.log"), 9_000)
	f.rt.Add(statstest.Sandbox{Pod: gone, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		Containers: []statstest.Container{{Name: "x", State: runtimeapi.ContainerState_CONTAINER_EXITED, Rootfs: f.root, RootfsBytes: 11_000, RootfsInodes: 1}}})
	p := f.provider(t)

	duOf := func(path string) (uint64, uint64) {
		b, i, err := du(path)
		if err != nil {
			t.Fatal(err)
		}
		return b, i
	}
	scratchB, scratchI := duOf(scratch)
	etcB, etcI := duOf(filepath.Join(f.root, "pods", "cart-uid", "etc-hosts"))
	cartLogB, cartLogI := duOf(cartLogs)
	goneLogB, goneLogI := duOf(goneLogs)

	s, err := p.Get(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	fs := s.Node.Fs
	wantUsed := 7_000 + 5_000 + 11_000 + cartLogB + goneLogB + scratchB + etcB
	wantInodes := 3 + 2 + 1 + cartLogI + goneLogI + scratchI + etcI
	wantVal(t, "nodefs capacity", fs.CapacityBytes, gib)
	wantVal(t, "nodefs used (layers, dead ones too; logs; emptyDir; etc-hosts)", fs.UsedBytes, wantUsed)
	wantVal(t, "nodefs available", fs.AvailableBytes, gib-wantUsed)
	wantVal(t, "nodefs inodes (one per 16 KiB)", fs.Inodes, gib/mockBytesPerInode)
	wantVal(t, "nodefs inodes used", fs.InodesUsed, wantInodes)
	wantVal(t, "nodefs inodes free", fs.InodesFree, gib/mockBytesPerInode-wantInodes)

	// The pod's shares of the nodefs have its capacity and availability.
	if len(s.Pods) != 1 {
		t.Fatalf("pods = %+v, want cart only", s.Pods)
	}
	ps := s.Pods[0]
	for what, st := range map[string]*statsapi.FsStats{
		"ephemeral storage": ps.EphemeralStorage,
		"app rootfs":        ps.Containers[0].Rootfs,
		"app logs":          ps.Containers[0].Logs,
		"scratch volume":    &ps.VolumeStats[0].FsStats,
	} {
		wantVal(t, what+" capacity", st.CapacityBytes, gib)
		wantVal(t, what+" available", st.AvailableBytes, gib-wantUsed)
		wantVal(t, what+" inodes free", st.InodesFree, gib/mockBytesPerInode-wantInodes)
	}
	if ps.VolumeStats[1].Name != "data" || ps.VolumeStats[1].CapacityBytes == nil || *ps.VolumeStats[1].CapacityBytes == gib {
		t.Errorf("the PVC's capacity = %v, want its own filesystem's", ps.VolumeStats[1].CapacityBytes)
	}

	// Removing the dead containers frees their layers.
	f.rt.Update("sandbox-cart-uid", func(s *statstest.Sandbox) { s.Containers = s.Containers[:1] })
	f.rt.Update("sandbox-gone-uid", func(s *statstest.Sandbox) { s.Containers = nil })
	s, err = p.Get(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "nodefs used after the dead containers are removed", s.Node.Fs.UsedBytes, wantUsed-5_000-11_000)

	// Full: nothing is available, not less.
	f.cfg.MockMachine.NodeFsCapacity = 10_000
	s, err = f.provider(t).Get(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "full nodefs available", s.Node.Fs.AvailableBytes, 0)
}

func TestTheMockMachinesImagefsIsUsedByTheImages(t *testing.T) {
	f := newFixture(t) // the images use 300 MiB and 4000 inodes
	f.cfg.MockMachine = cadvisor.MockMachine{ImageFsCapacity: 500 * mib}
	p := f.provider(t)
	img, containerFs, err := p.ImageFsStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "imagefs capacity", img.CapacityBytes, 500*mib)
	wantVal(t, "imagefs used", img.UsedBytes, 300*mib)
	wantVal(t, "imagefs available", img.AvailableBytes, 200*mib)
	wantVal(t, "imagefs inodes", img.Inodes, 500*mib/mockBytesPerInode)
	wantVal(t, "imagefs inodes free", img.InodesFree, 500*mib/mockBytesPerInode-4000)
	if containerFs != img {
		t.Error("the containers' filesystem is the image filesystem's answer, as before")
	}

	s, err := p.Get(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "summary imagefs available", s.Node.Runtime.ImageFs.AvailableBytes, 200*mib)
	if s.Node.Fs == nil || val(t, "nodefs capacity", s.Node.Fs.CapacityBytes) == 500*mib {
		t.Errorf("nodefs = %+v, want the host's (no NodeFsCapacity)", s.Node.Fs)
	}
	wantVal(t, "memory available (no MemoryCapacity: the host's with the kubelet)", s.Node.Memory.AvailableBytes, gib-50*mib)

	f.cfg.Images = &statstest.Images{UsedBytes: 600 * mib}
	img, _, err = f.provider(t).ImageFsStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "full imagefs available", img.AvailableBytes, 0)
}
