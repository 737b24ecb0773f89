package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"mykubelet/mylib/kuberuntime"
)

// fsInfo is a filesystem's size, as statfs(2) tells it (cAdvisor's
// FsInfo): bytes and inodes.
type fsInfo struct {
	time                       time.Time
	capacity, available, usage uint64
	inodes, inodesFree         uint64

	// mock: the mock machine's filesystem (newMockFs), whose usage is
	// known only once the pods are counted; given are the FsStats that
	// got its capacity meanwhile, whose available figures settle fills.
	mock  bool
	given []*statsapi.FsStats
}

// mockBytesPerInode is the mock filesystems' inode ratio: one inode per
// 16 KiB, mke2fs's default for ext4. The mock machine has no disk to ask,
// so its inode count is its capacity divided by it.
const mockBytesPerInode = 16 << 10

// newMockFs is a mock machine's filesystem of capacity bytes: nothing
// used yet (settle says what is).
func newMockFs(capacity uint64, now time.Time) *fsInfo {
	inodes := capacity / mockBytesPerInode
	return &fsInfo{time: now, mock: true, capacity: capacity, available: capacity, inodes: inodes, inodesFree: inodes}
}

// settle sets a mock filesystem's usage (available: capacity - used, never
// negative; likewise the free inodes) and writes the available figures
// into every FsStats that got its capacity.
func (f *fsInfo) settle(used, inodesUsed uint64) {
	f.usage, f.available = used, sub(f.capacity, used)
	f.inodesFree = sub(f.inodes, inodesUsed)
	for _, s := range f.given {
		s.AvailableBytes, s.InodesFree = ptr(f.available), ptr(f.inodesFree)
	}
}

// statfs measures the filesystem that holds path.
func statfs(path string, now time.Time) (fsInfo, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsInfo{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return fsInfo{
		time:       now,
		capacity:   st.Blocks * bs,
		available:  st.Bavail * bs,
		usage:      (st.Blocks - st.Bfree) * bs,
		inodes:     st.Files,
		inodesFree: st.Ffree,
	}, nil
}

// fsStats is the filesystem's FsStats; withUsage adds its used bytes and
// inodes (the node's Fs), else they are left for the caller to count.
func (f *fsInfo) fsStats(withUsage bool) *statsapi.FsStats {
	s := &statsapi.FsStats{Time: metav1.NewTime(f.time)}
	f.capacityInto(s)
	if withUsage {
		s.UsedBytes = ptr(f.usage)
		s.InodesUsed = ptr(sub(f.inodes, f.inodesFree))
	}
	return s
}

// capacityInto sets s's capacity, available bytes and inodes.
func (f *fsInfo) capacityInto(s *statsapi.FsStats) {
	s.CapacityBytes, s.AvailableBytes = ptr(f.capacity), ptr(f.available)
	s.Inodes, s.InodesFree = ptr(f.inodes), ptr(f.inodesFree)
	if f.mock {
		f.given = append(f.given, s)
	}
}

// isMock reports whether f is a mock machine's filesystem.
func (f *fsInfo) isMock() bool { return f != nil && f.mock }

// diskUsage is bytes and inodes used on a filesystem.
type diskUsage struct{ bytes, inodes uint64 }

// add adds an FsStats's used figures (nil: none).
func (d *diskUsage) add(s *statsapi.FsStats) {
	if s != nil {
		d.bytes += deref(s.UsedBytes)
		d.inodes += deref(s.InodesUsed)
	}
}

// du is the disk usage under path (bytes in blocks, as du(1), and the
// inodes, as find(1) counts them), on path's filesystem only (du -x):
// upstream's MetricsDu. Links are not followed.
func du(path string) (usedBytes, inodes uint64, err error) {
	root, err := os.Lstat(path)
	if err != nil {
		return 0, 0, err
	}
	dev := root.Sys().(*syscall.Stat_t).Dev
	err = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walked: count what is left
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil // removed while walked
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Dev != dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		inodes++
		usedBytes += uint64(st.Blocks) * 512
		return nil
	})
	return usedBytes, inodes, err
}

// filesStats is the usage of the files (not directories) right under dir,
// with the nodefs's capacity (upstream's fileMetricsByDir and
// metricsByPathToFsStats).
func filesStats(dir string, rootFs *fsInfo, now time.Time) (*statsapi.FsStats, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	s := baseFsStats(rootFs, now)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, i, err := du(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("failed to get fsstats for %q: %w", filepath.Join(dir, e.Name()), err)
		}
		s.UsedBytes, s.InodesUsed = addUsage(s.UsedBytes, &b), addUsage(s.InodesUsed, &i)
	}
	return s, nil
}

// baseFsStats is an FsStats with the nodefs's capacity, if known.
func baseFsStats(rootFs *fsInfo, now time.Time) *statsapi.FsStats {
	if rootFs == nil {
		return &statsapi.FsStats{Time: metav1.NewTime(now)}
	}
	return rootFs.fsStats(false)
}

// containerLogStats is a container's log files (all its attempts).
func (p *Provider) containerLogStats(pod *v1.Pod, container string, rootFs *fsInfo, now time.Time) (*statsapi.FsStats, error) {
	dir := kuberuntime.BuildContainerLogsDirectory(p.cfg.PodLogsDirectory, pod.Namespace, pod.Name, pod.UID, container)
	return filesStats(dir, rootFs, now)
}

// makePodStorageStats is the pod's volumes and its ephemeral storage:
// its containers' writable layers and logs, its local ephemeral volumes
// (emptyDir on disk, configMap, gitRepo), its own log files and its
// etc-hosts file (upstream's makePodStorageStats). It returns what of it
// is neither a container's writable layer nor a log: its local ephemeral
// volumes and etc-hosts file.
func (p *Provider) makePodStorageStats(ps *statsapi.PodStats, pod *v1.Pod, rootFs *fsInfo, now time.Time) (local diskUsage) {
	ephemeral, persistent := p.podVolumeStats(pod, rootFs, now)
	if len(ephemeral)+len(persistent) > 0 {
		ps.VolumeStats = append(append([]statsapi.VolumeStats{}, ephemeral...), persistent...)
		if rootFs.isMock() { // in place: settle fills these very FsStats
			for i := range ephemeral {
				rootFs.capacityInto(&ps.VolumeStats[i].FsStats)
			}
		}
	}
	podLogs, err := filesStats(kuberuntime.BuildPodLogsDirectory(p.cfg.PodLogsDirectory, pod.Namespace, pod.Name, pod.UID), rootFs, now)
	if err != nil {
		klog.V(6).InfoS("Unable to fetch pod log stats", "pod", klog.KObj(pod), "err", err)
	}
	var etcHosts *statsapi.FsStats
	if p.cfg.RootDirectory != "" {
		path := filepath.Join(p.cfg.RootDirectory, "pods", string(pod.UID), "etc-hosts")
		if b, i, err := du(path); err == nil {
			etcHosts = baseFsStats(rootFs, now)
			etcHosts.UsedBytes, etcHosts.InodesUsed = &b, &i
		}
	}
	ps.EphemeralStorage = calcEphemeralStorage(ps.Containers, ephemeral, rootFs, podLogs, etcHosts, now)
	for i := range ephemeral {
		local.add(&ephemeral[i].FsStats)
	}
	local.add(etcHosts)
	return local
}

// podVolumeStats measures each mounted volume of the pod, split as
// upstream's volumeStatCalculator: local ephemeral ones, then the others.
// On a mock nodefs (rootFs) the local ephemeral ones are left without a
// capacity: the caller gives them the mock's, they are on the node's
// filesystem.
func (p *Provider) podVolumeStats(pod *v1.Pod, rootFs *fsInfo, now time.Time) (ephemeral, persistent []statsapi.VolumeStats) {
	if p.cfg.Volumes == nil {
		return nil, nil
	}
	specs := make(map[string]v1.Volume, len(pod.Spec.Volumes))
	for _, v := range pod.Spec.Volumes {
		specs[v.Name] = v
	}
	for _, vol := range p.cfg.Volumes(pod.UID) {
		used, inodesUsed, err := du(vol.Path)
		if err != nil {
			klog.V(4).InfoS("Failed to calculate volume metrics", "pod", klog.KObj(pod), "podUID", pod.UID, "volumeName", vol.Name, "err", err)
			continue
		}
		vs := statsapi.VolumeStats{Name: vol.Name, FsStats: statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: &used, InodesUsed: &inodesUsed}}
		spec := specs[vol.Name]
		if spec.PersistentVolumeClaim != nil {
			vs.PVCRef = &statsapi.PVCReference{Name: spec.PersistentVolumeClaim.ClaimName, Namespace: pod.Namespace}
		} else if spec.Ephemeral != nil {
			vs.PVCRef = &statsapi.PVCReference{Name: pod.Name + "-" + spec.Name, Namespace: pod.Namespace}
		}
		local := isLocalEphemeralVolume(spec)
		if !local || !rootFs.isMock() { // a mock's: makePodStorageStats
			if fi, err := statfs(vol.Path, now); err == nil {
				fi.capacityInto(&vs.FsStats)
			}
		}
		if local {
			ephemeral = append(ephemeral, vs)
		} else {
			persistent = append(persistent, vs)
		}
	}
	byName := func(s []statsapi.VolumeStats) {
		sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	}
	byName(ephemeral)
	byName(persistent)
	return ephemeral, persistent
}

// isLocalEphemeralVolume is upstream's (pkg/volume/util): the volumes
// whose bytes are the node's disk and die with the pod.
func isLocalEphemeralVolume(v v1.Volume) bool {
	return v.GitRepo != nil ||
		(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) ||
		v.ConfigMap != nil
}

// calcEphemeralStorage adds up a pod's ephemeral storage (upstream's).
func calcEphemeralStorage(containers []statsapi.ContainerStats, volumes []statsapi.VolumeStats, rootFs *fsInfo,
	podLogs, etcHosts *statsapi.FsStats, now time.Time) *statsapi.FsStats {
	s := baseFsStats(rootFs, now)
	for _, c := range containers {
		if c.Rootfs == nil {
			continue
		}
		s.Time = maxUpdateTime(s.Time, c.Rootfs.Time)
		s.UsedBytes, s.InodesUsed = addUsage(s.UsedBytes, c.Rootfs.UsedBytes), addUsage(s.InodesUsed, c.Rootfs.InodesUsed)
		if c.Logs != nil {
			s.Time = maxUpdateTime(s.Time, c.Logs.Time)
			s.UsedBytes, s.InodesUsed = addUsage(s.UsedBytes, c.Logs.UsedBytes), addUsage(s.InodesUsed, c.Logs.InodesUsed)
		}
	}
	for _, v := range volumes {
		s.Time = maxUpdateTime(s.Time, v.Time)
		s.UsedBytes, s.InodesUsed = addUsage(s.UsedBytes, v.UsedBytes), addUsage(s.InodesUsed, v.InodesUsed)
	}
	for _, extra := range []*statsapi.FsStats{podLogs, etcHosts} {
		if extra != nil {
			s.Time = maxUpdateTime(s.Time, extra.Time)
			s.UsedBytes, s.InodesUsed = addUsage(s.UsedBytes, extra.UsedBytes), addUsage(s.InodesUsed, extra.InodesUsed)
		}
	}
	return s
}

func maxUpdateTime(a, b metav1.Time) metav1.Time {
	if a.Before(&b) {
		return b
	}
	return a
}

// addUsage is a+b where nil is "unknown", not 0.
func addUsage(a, b *uint64) *uint64 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return ptr(*a + *b)
}

// rlimitStats is the node's process table: its size (pid_max) and how
// many processes run (upstream's pidlimit.Stats); nil if unreadable.
func rlimitStats(now time.Time) *statsapi.RlimitStats {
	s := &statsapi.RlimitStats{Time: metav1.NewTime(now)}
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			s.MaxPID = &v
		}
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		n := int64(si.Procs)
		s.NumOfRunningProcesses = &n
	}
	if s.MaxPID == nil && s.NumOfRunningProcesses == nil {
		return nil
	}
	return s
}

// bootTime is when the node booted (/proc/stat's btime).
func bootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "btime" {
			s, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(s, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in /proc/stat")
}

// readProcessUsage is this process's usage: CPU time and page faults from
// getrusage(2), resident memory from /proc/self/statm.
func readProcessUsage() (ProcessUsage, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return ProcessUsage{}, fmt.Errorf("getrusage: %w", err)
	}
	u := ProcessUsage{
		CPUNanoSeconds:  uint64(ru.Utime.Nano() + ru.Stime.Nano()),
		PageFaults:      uint64(ru.Minflt + ru.Majflt),
		MajorPageFaults: uint64(ru.Majflt),
	}
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return ProcessUsage{}, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return ProcessUsage{}, fmt.Errorf("/proc/self/statm: %q", b)
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return ProcessUsage{}, fmt.Errorf("/proc/self/statm: %w", err)
	}
	u.WorkingSetBytes = pages * uint64(os.Getpagesize())
	return u, nil
}
