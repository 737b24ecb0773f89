package cm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// DefaultCgroupMount is where the cgroup filesystems are mounted.
const DefaultCgroupMount = "/sys/fs/cgroup"

// CgroupSubsystems says where the cgroup hierarchies are (upstream's, from
// the mount table).
type CgroupSubsystems struct {
	// Unified is cgroup v2's mount point when the node runs cgroup v2
	// alone (mounted on /sys/fs/cgroup); "" on cgroup v1, hybrid too.
	Unified string
	// MountPoints is each cgroup v1 controller's hierarchy ("cpu":
	// "/sys/fs/cgroup/cpu", "systemd": "/sys/fs/cgroup/systemd"); empty
	// on v2. On a hybrid machine (cgroup2 mounted beside v1, e.g. on
	// /sys/fs/cgroup/unified) "unified" is that mount: it has no
	// controllers, but runc makes each container's cgroup there too, its
	// parents included, so a pod's cgroup is made and removed there as
	// well (upstream's libcontainer manager does the same in hybrid mode).
	MountPoints map[string]string
}

// GetCgroupSubsystems reads /proc/self/mountinfo.
func GetCgroupSubsystems() (*CgroupSubsystems, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountInfo(f, DefaultCgroupMount)
}

// parseMountInfo finds the cgroup mounts in a mountinfo table: cgroup v2
// alone when cgroup2 is mounted on unifiedRoot, else the v1 hierarchies
// with their controllers (super options; "name=systemd" is "systemd").
func parseMountInfo(r io.Reader, unifiedRoot string) (*CgroupSubsystems, error) {
	cs := &CgroupSubsystems{MountPoints: map[string]string{}}
	s := bufio.NewScanner(r)
	for s.Scan() {
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		mountPoint := fields[4]
		switch tail[0] {
		case "cgroup2":
			if mountPoint == unifiedRoot {
				cs.Unified = mountPoint
			} else {
				cs.MountPoints[hybridUnified] = mountPoint
			}
		case "cgroup":
			for _, opt := range strings.Split(tail[2], ",") {
				switch {
				case opt == "rw" || opt == "ro" || strings.HasPrefix(opt, "release_agent=") || opt == "clone_children" || opt == "noprefix" || opt == "xattr":
				case strings.HasPrefix(opt, "name="):
					cs.MountPoints[strings.TrimPrefix(opt, "name=")] = mountPoint
				default:
					cs.MountPoints[opt] = mountPoint
				}
			}
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if cs.Unified != "" {
		cs.MountPoints = map[string]string{}
		return cs, nil
	}
	if len(cs.MountPoints) == 0 || len(cs.MountPoints) == 1 && cs.MountPoints[hybridUnified] != "" {
		return nil, errors.New("no cgroup filesystem is mounted")
	}
	return cs, nil
}

// hybridUnified is MountPoints' key of a hybrid machine's cgroup2 mount.
const hybridUnified = "unified"

// Version is 2 on cgroup v2 alone, else 1.
func (cs *CgroupSubsystems) Version() int {
	if cs.Unified != "" {
		return 2
	}
	return 1
}

// writableRoot is a directory the kubelet must be able to write to make
// cgroups: the unified root, or the memory hierarchy's.
func (cs *CgroupSubsystems) writableRoot() string {
	if cs.Unified != "" {
		return cs.Unified
	}
	return cs.MountPoints["memory"]
}

// CgroupManager makes, changes and removes cgroups (upstream's interface,
// without hugepages and cpusets).
type CgroupManager interface {
	// Create makes the cgroup in every hierarchy and sets its resources.
	Create(*CgroupConfig) error
	// Update sets the resources of a cgroup that exists.
	Update(*CgroupConfig) error
	// Destroy removes the cgroup and the cgroups under it.
	Destroy(*CgroupConfig) error
	// Exists: the cgroup is in every hierarchy the kubelet needs.
	Exists(CgroupName) bool
	// Validate says which hierarchies lack it.
	Validate(CgroupName) error
	// Name is the cgroupfs name; CgroupName reads one.
	Name(CgroupName) string
	CgroupName(string) CgroupName
	// Pids are the processes in the cgroup and under it.
	Pids(CgroupName) []int
	// ReduceCPULimits gives the cgroup the least CPU weight.
	ReduceCPULimits(CgroupName) error
	// Version is the cgroup version, 1 or 2.
	Version() int
	// GetCgroupConfig reads a cgroup's CPU (shares, quota, period) or
	// memory (limit) as they are now, for in-place resize.
	GetCgroupConfig(name CgroupName, resource v1.ResourceName) (*ResourceConfig, error)
	// MemoryUsage is the memory the cgroup uses now, in bytes.
	MemoryUsage(name CgroupName) (int64, error)
}

// cgroupV1Needed are the hierarchies a cgroup must be in to exist
// (upstream's allow list in cgroupV1impl.Validate).
var cgroupV1Needed = []string{"cpu", "cpuacct", "cpuset", "memory", "systemd", "pids", "hugetlb"}

// cgroupV2Controllers are the controllers the kubelet enables in the
// cgroups above its own (upstream's getSupportedUnifiedControllers, and
// io, which runc uses).
var cgroupV2Controllers = []string{"cpu", "cpuset", "memory", "hugetlb", "pids", "io"}

// cgroupManager is the cgroupfs driver on cgroup v1 or v2.
type cgroupManager struct {
	subsystems *CgroupSubsystems
}

// NewCgroupManager is the cgroup manager of a driver: only cgroupfs; ""
// is cgroupfs too.
func NewCgroupManager(cs *CgroupSubsystems, driver string) (CgroupManager, error) {
	if driver != "" && driver != CgroupfsDriver {
		return nil, fmt.Errorf("cgroupDriver %q is not supported by this kubelet: only %q", driver, CgroupfsDriver)
	}
	return &cgroupManager{subsystems: cs}, nil
}

func (m *cgroupManager) Version() int                   { return m.subsystems.Version() }
func (m *cgroupManager) Name(name CgroupName) string    { return name.ToCgroupfs() }
func (m *cgroupManager) CgroupName(s string) CgroupName { return ParseCgroupfsToCgroupName(s) }
func (m *cgroupManager) unifiedPath(n CgroupName) string {
	return filepath.Join(m.subsystems.Unified, n.ToCgroupfs())
}

// paths are the cgroup's directory in each hierarchy, controller to path
// (on v2, "" to the one path); co-mounted controllers share a path.
func (m *cgroupManager) paths(name CgroupName) map[string]string {
	if m.subsystems.Unified != "" {
		return map[string]string{"": m.unifiedPath(name)}
	}
	out := map[string]string{}
	for c, mp := range m.subsystems.MountPoints {
		out[c] = filepath.Join(mp, name.ToCgroupfs())
	}
	return out
}

// dirs are the distinct directories of paths, sorted.
func (m *cgroupManager) dirs(name CgroupName) []string {
	var out []string
	for _, p := range m.paths(name) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Validate says whether the cgroup is in every hierarchy it needs: on v1
// those of cgroupV1Needed that are mounted, on v2 the one directory.
func (m *cgroupManager) Validate(name CgroupName) error {
	var missing []string
	if m.subsystems.Unified != "" {
		if p := m.unifiedPath(name); !isDir(p) {
			missing = append(missing, p)
		}
	} else {
		paths := m.paths(name)
		for _, c := range cgroupV1Needed {
			if p, ok := paths[c]; ok && !isDir(p) {
				missing = append(missing, p)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cgroup %q has some missing paths: %s", name.ToCgroupfs(), strings.Join(missing, ", "))
	}
	return nil
}

func (m *cgroupManager) Exists(name CgroupName) bool { return m.Validate(name) == nil }

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Create makes the cgroup's directory in every hierarchy (on v2, after
// enabling the controllers in the cgroups above it; on v1, a new cpuset
// cgroup gets its parent's CPUs and memory nodes), then sets its
// resources. Upstream only logs a failure to set them; this returns it.
func (m *cgroupManager) Create(cfg *CgroupConfig) error {
	if m.subsystems.Unified != "" {
		if err := m.enableControllers(cfg.Name); err != nil {
			return err
		}
	}
	for c, p := range m.paths(cfg.Name) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", cfg.Name.ToCgroupfs(), err)
		}
		if c == "cpuset" {
			if err := copyCpusetFromParent(p); err != nil {
				return fmt.Errorf("create cgroup %s: %w", cfg.Name.ToCgroupfs(), err)
			}
		}
	}
	return m.Update(cfg)
}

// enableControllers writes "+cpu +memory …" into cgroup.subtree_control
// of each cgroup from the root down to name's parent, the controllers
// each offers (cgroup.controllers; the root's when a level has no such
// file), as runc's CreateCgroupPath. A controller the kernel refuses is
// left out.
func (m *cgroupManager) enableControllers(name CgroupName) error {
	rootAvail := readControllers(m.subsystems.Unified)
	for i := 0; i < len(name); i++ {
		dir := m.unifiedPath(name[:i])
		if i > 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("create cgroup %s: %w", name[:i].ToCgroupfs(), err)
			}
		}
		avail := readControllers(dir)
		if avail == nil {
			avail = rootAvail
		}
		var want []string
		for _, c := range cgroupV2Controllers {
			if slices.Contains(avail, c) {
				want = append(want, "+"+c)
			}
		}
		if len(want) == 0 {
			continue
		}
		if writeFile(dir, "cgroup.subtree_control", strings.Join(want, " ")) == nil {
			continue
		}
		for _, w := range want {
			_ = writeFile(dir, "cgroup.subtree_control", w) // one the kernel refuses is left out, as runc does
		}
	}
	return nil
}

// readControllers is a v2 cgroup's cgroup.controllers; nil if unreadable.
func readControllers(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// copyCpusetFromParent gives a new v1 cpuset cgroup its parent's
// cpuset.cpus and cpuset.mems when its own are empty: a process can join
// a cpuset cgroup only when both are set. The parent without them:
// nothing to do.
func copyCpusetFromParent(dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		cur, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if strings.TrimSpace(string(cur)) != "" {
			continue
		}
		parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := writeFile(dir, f, strings.TrimSpace(string(parent))); err != nil {
			return err
		}
	}
	return nil
}

// Update writes the cgroup's resources: on v1 memory.limit_in_bytes,
// cpu.shares, cpu.cfs_period_us and cpu.cfs_quota_us, pids.max; on v2
// memory.max, cpu.weight, cpu.max, pids.max. A nil field is left alone.
func (m *cgroupManager) Update(cfg *CgroupConfig) error {
	r := cfg.ResourceParameters
	if r == nil {
		return nil
	}
	var err error
	if m.subsystems.Unified != "" {
		err = setV2(m.unifiedPath(cfg.Name), r)
	} else {
		err = m.setV1(cfg.Name, r)
	}
	if err != nil {
		return fmt.Errorf("set cgroup %s: %w", cfg.Name.ToCgroupfs(), err)
	}
	return nil
}

func (m *cgroupManager) setV1(name CgroupName, r *ResourceConfig) error {
	paths := m.paths(name)
	if p, ok := paths["memory"]; ok && r.Memory != nil && *r.Memory != 0 {
		if err := writeFile(p, "memory.limit_in_bytes", strconv.FormatInt(*r.Memory, 10)); err != nil {
			return err
		}
	}
	if p, ok := paths["cpu"]; ok {
		if r.CPUShares != nil && *r.CPUShares != 0 {
			if err := writeFile(p, "cpu.shares", strconv.FormatUint(*r.CPUShares, 10)); err != nil {
				return err
			}
		}
		if err := setCFS(p, r); err != nil {
			return err
		}
	}
	if p, ok := paths["pids"]; ok && r.PidsLimit != nil && *r.PidsLimit != 0 {
		if err := writeFile(p, "pids.max", pidsMax(*r.PidsLimit)); err != nil {
			return err
		}
	}
	return nil
}

// setCFS writes the period, then the quota; a period the kernel refuses
// with the old quota (EINVAL) is written again after the quota, as runc.
func setCFS(p string, r *ResourceConfig) error {
	retryPeriod := false
	if r.CPUPeriod != nil && *r.CPUPeriod != 0 {
		if err := writeFile(p, "cpu.cfs_period_us", strconv.FormatUint(*r.CPUPeriod, 10)); err != nil {
			if !errors.Is(err, unix.EINVAL) || r.CPUQuota == nil || *r.CPUQuota == 0 {
				return err
			}
			retryPeriod = true
		}
	}
	if r.CPUQuota != nil && *r.CPUQuota != 0 {
		if err := writeFile(p, "cpu.cfs_quota_us", strconv.FormatInt(*r.CPUQuota, 10)); err != nil {
			return err
		}
	}
	if retryPeriod {
		return writeFile(p, "cpu.cfs_period_us", strconv.FormatUint(*r.CPUPeriod, 10))
	}
	return nil
}

func setV2(p string, r *ResourceConfig) error {
	if r.Memory != nil && *r.Memory != 0 {
		v := "max"
		if *r.Memory > 0 {
			v = strconv.FormatInt(*r.Memory, 10)
		}
		if err := writeFile(p, "memory.max", v); err != nil {
			return err
		}
	}
	if r.CPUShares != nil && *r.CPUShares != 0 {
		if err := writeFile(p, "cpu.weight", strconv.FormatUint(CPUWeight(*r.CPUShares), 10)); err != nil {
			return err
		}
	}
	if v, ok := cpuMax(r); ok {
		if err := writeFile(p, "cpu.max", v); err != nil {
			return err
		}
	}
	if r.PidsLimit != nil && *r.PidsLimit != 0 {
		if err := writeFile(p, "pids.max", pidsMax(*r.PidsLimit)); err != nil {
			return err
		}
	}
	return nil
}

// cpuMax is v2's cpu.max, "<quota|max> [period]", as runc writes it;
// false when neither is set.
func cpuMax(r *ResourceConfig) (string, bool) {
	var quota int64
	var period uint64
	if r.CPUQuota != nil {
		quota = *r.CPUQuota
	}
	if r.CPUPeriod != nil {
		period = *r.CPUPeriod
	}
	if quota == 0 && period == 0 {
		return "", false
	}
	v := "max"
	if quota > 0 {
		v = strconv.FormatInt(quota, 10)
	}
	if period != 0 {
		v += " " + strconv.FormatUint(period, 10)
	}
	return v, true
}

// pidsMax is pids.max for a limit: "max" for none (negative).
func pidsMax(limit int64) string {
	if limit < 0 {
		return "max"
	}
	return strconv.FormatInt(limit, 10)
}

// writeFile writes a cgroup file whole. (O_CREATE: on the cgroup
// filesystem the files exist; in a test's directory they do not.)
func writeFile(dir, file, value string) error {
	p := filepath.Join(dir, file)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, p, err)
	}
	return nil
}

// Destroy removes the cgroup, the cgroups under it first, in every
// hierarchy; a cgroup that still holds processes cannot be removed (the
// kernel's EBUSY), and says so. One not there is no error.
func (m *cgroupManager) Destroy(cfg *CgroupConfig) error {
	var errs []error
	for _, d := range m.dirs(cfg.Name) {
		if err := removeCgroupDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("destroy cgroup %s: %w", cfg.Name.ToCgroupfs(), err)
	}
	return nil
}

// removeCgroupDir removes dir's subdirectories, then dir (cgroupfs
// removes a cgroup's files with it; in a test's directory they are
// removed first).
func removeCgroupDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroupDir(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	err = os.Remove(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !isCgroupFS(dir) {
		// A test's plain directory: its files go first.
		for _, e := range entries {
			if !e.IsDir() {
				_ = os.Remove(filepath.Join(dir, e.Name())) // the Remove below reports what is left
			}
		}
		err = os.Remove(dir)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// isCgroupFS: dir is on a cgroup filesystem (v1 or v2).
func isCgroupFS(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	return st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC
}

// Pids are the processes in the cgroup and the cgroups under it, in any
// hierarchy.
func (m *cgroupManager) Pids(name CgroupName) []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range m.dirs(name) {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil // a cgroup removed meanwhile has no processes
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	sort.Ints(out)
	return out
}

// ReduceCPULimits gives the cgroup MinShares, as upstream does to a pod
// cgroup waiting for its volumes to go.
func (m *cgroupManager) ReduceCPULimits(name CgroupName) error {
	shares := uint64(MinShares)
	return m.Update(&CgroupConfig{Name: name, ResourceParameters: &ResourceConfig{CPUShares: &shares}})
}

// GetCgroupConfig reads the cgroup's resources of one kind, as upstream's
// function of this name: for CPU, its shares, quota and period (on v2
// cpu.weight turned back into shares, and cpu.max, "max" being quota
// -1); for memory, its limit (v2's "max", none: math.MaxInt64; v1 writes
// none as a large page-aligned number).
func (m *cgroupManager) GetCgroupConfig(name CgroupName, resource v1.ResourceName) (*ResourceConfig, error) {
	paths := m.paths(name)
	if m.subsystems.Unified != "" {
		paths = map[string]string{"cpu": m.unifiedPath(name), "memory": m.unifiedPath(name)}
	}
	var cfg ResourceConfig
	var err error
	switch {
	case resource == v1.ResourceCPU && m.subsystems.Unified != "":
		err = readV2CPU(paths["cpu"], &cfg)
	case resource == v1.ResourceCPU:
		err = readV1CPU(paths["cpu"], &cfg)
	case resource == v1.ResourceMemory:
		file := "memory.limit_in_bytes"
		if m.subsystems.Unified != "" {
			file = "memory.max"
		}
		var limit int64
		limit, err = readInt(paths["memory"], file)
		cfg.Memory = &limit
	default:
		return nil, fmt.Errorf("cgroup %s: resource %q has no config here", name.ToCgroupfs(), resource)
	}
	if err != nil {
		return nil, fmt.Errorf("read cgroup %s: %w", name.ToCgroupfs(), err)
	}
	return &cfg, nil
}

func readV1CPU(dir string, cfg *ResourceConfig) error {
	shares, err := readInt(dir, "cpu.shares")
	if err != nil {
		return err
	}
	quota, err := readInt(dir, "cpu.cfs_quota_us")
	if err != nil {
		return err
	}
	period, err := readInt(dir, "cpu.cfs_period_us")
	if err != nil {
		return err
	}
	s, p := uint64(shares), uint64(period)
	cfg.CPUShares, cfg.CPUQuota, cfg.CPUPeriod = &s, &quota, &p
	return nil
}

func readV2CPU(dir string, cfg *ResourceConfig) error {
	weight, err := readInt(dir, "cpu.weight")
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return err
	}
	fields := strings.Fields(string(b)) // "<quota|max> <period>"
	if len(fields) != 2 {
		return fmt.Errorf("%s: cpu.max %q", dir, b)
	}
	quota := int64(-1)
	if fields[0] != "max" {
		if quota, err = strconv.ParseInt(fields[0], 10, 64); err != nil {
			return err
		}
	}
	period, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return err
	}
	shares := CPUWeightToShares(uint64(weight))
	cfg.CPUShares, cfg.CPUQuota, cfg.CPUPeriod = &shares, &quota, &period
	return nil
}

// MemoryUsage reads memory.usage_in_bytes (v1) or memory.current (v2).
func (m *cgroupManager) MemoryUsage(name CgroupName) (int64, error) {
	dir, file := m.paths(name)["memory"], "memory.usage_in_bytes"
	if m.subsystems.Unified != "" {
		dir, file = m.unifiedPath(name), "memory.current"
	}
	usage, err := readInt(dir, file)
	if err != nil {
		return 0, fmt.Errorf("read cgroup %s: %w", name.ToCgroupfs(), err)
	}
	return usage, nil
}

// readInt reads a cgroup file holding one number; "max" is
// math.MaxInt64.
func readInt(dir, file string) (int64, error) {
	if dir == "" {
		return 0, fmt.Errorf("%s: no such hierarchy", file)
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return math.MaxInt64, nil
	}
	return strconv.ParseInt(v, 10, 64)
}
