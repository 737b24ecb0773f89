package kubeletconfig

// The node pressure settings: the eviction thresholds, the image GC
// policy and the image pulls; their flags (upstream's names, from
// cmd/kubelet/app/options) and their checks (upstream's
// pkg/kubelet/apis/config/validation, and the threshold syntax that
// upstream's eviction.ParseThresholdConfig refuses at start-up).

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/eviction"
)

// PressureFlags are upstream's eviction, image GC and image pull flags,
// registered on a flag set by AddNodePressureFlags; ApplyTo copies those
// given on the command line over a configuration.
type PressureFlags struct {
	fs     *flag.FlagSet
	values kubeletv1beta1.KubeletConfiguration // where the flags land
	copies map[string]func(to *kubeletv1beta1.KubeletConfiguration)
}

// AddNodePressureFlags registers, on fs, the flags of the node pressure
// settings under upstream's names, their defaults upstream's:
//
//	--eviction-hard, --eviction-soft               signal<quantity or percentage, comma-separated
//	--eviction-soft-grace-period                   signal=duration
//	--eviction-minimum-reclaim                     signal=quantity or percentage
//	--eviction-pressure-transition-period, --eviction-max-pod-grace-period
//	--image-gc-high-threshold, --image-gc-low-threshold, --minimum-image-ttl-duration
//	--serialize-image-pulls, --registry-qps, --registry-burst
//
// and two of the course's: --max-parallel-image-pulls (upstream has only
// the field maxParallelImagePulls) and --minimum-image-gc-age, another
// name for --minimum-image-ttl-duration after its field, imageMinimumGCAge.
// As upstream's map flags, the first --eviction-hard given replaces the
// default map, the next ones add to it; --eviction-hard= sets none.
// AddFlags registers them too.
func AddNodePressureFlags(fs *flag.FlagSet) *PressureFlags {
	p := &PressureFlags{fs: fs, copies: map[string]func(*kubeletv1beta1.KubeletConfiguration){}}
	v := &p.values
	v.EvictionHard = DefaultEvictionHard()
	v.EvictionPressureTransitionPeriod.Duration = DefaultEvictionPressureTransitionPeriod
	v.ImageMinimumGCAge.Duration = DefaultImageMinimumGCAge
	v.ImageGCHighThresholdPercent = ptr.To[int32](DefaultImageGCHighThresholdPercent)
	v.ImageGCLowThresholdPercent = ptr.To[int32](DefaultImageGCLowThresholdPercent)
	v.SerializeImagePulls = ptr.To(true)
	v.RegistryPullQPS = ptr.To[int32](DefaultRegistryPullQPS)
	v.RegistryBurst = DefaultRegistryBurst

	p.add(&mapFlag{m: &v.EvictionHard, sep: "<", example: "memory.available<100Mi"}, "eviction-hard",
		"hard eviction thresholds, signal<quantity or percentage of capacity: a pod is evicted at once when one is met (config: evictionHard)",
		func(to *kubeletv1beta1.KubeletConfiguration) { to.EvictionHard = maps.Clone(v.EvictionHard) })
	p.add(&mapFlag{m: &v.EvictionSoft, sep: "<", example: "memory.available<1.5Gi"}, "eviction-soft",
		"soft eviction thresholds (e.g. memory.available<1.5Gi): a pod is evicted when one stays met for its grace period (config: evictionSoft)",
		func(to *kubeletv1beta1.KubeletConfiguration) { to.EvictionSoft = maps.Clone(v.EvictionSoft) })
	p.add(&mapFlag{m: &v.EvictionSoftGracePeriod, sep: "=", example: "memory.available=1m30s"}, "eviction-soft-grace-period",
		"how long each soft threshold must hold before a pod is evicted (e.g. memory.available=1m30s) (config: evictionSoftGracePeriod)",
		func(to *kubeletv1beta1.KubeletConfiguration) {
			to.EvictionSoftGracePeriod = maps.Clone(v.EvictionSoftGracePeriod)
		})
	p.add(&mapFlag{m: &v.EvictionMinimumReclaim, sep: "=", example: "imagefs.available=2Gi"}, "eviction-minimum-reclaim",
		"how much past a threshold to reclaim once it is met (e.g. imagefs.available=2Gi) (config: evictionMinimumReclaim)",
		func(to *kubeletv1beta1.KubeletConfiguration) {
			to.EvictionMinimumReclaim = maps.Clone(v.EvictionMinimumReclaim)
		})
	p.add(&durationFlag{d: &v.EvictionPressureTransitionPeriod.Duration}, "eviction-pressure-transition-period",
		"how long a pressure condition stays once its threshold is no longer met (config: evictionPressureTransitionPeriod)",
		func(to *kubeletv1beta1.KubeletConfiguration) {
			to.EvictionPressureTransitionPeriod = v.EvictionPressureTransitionPeriod
		})
	p.add(&int32Flag{p: &v.EvictionMaxPodGracePeriod, min: -1 << 31, max: 1<<31 - 1}, "eviction-max-pod-grace-period",
		"the grace period, in seconds, of a pod evicted on a soft threshold; negative: the pod's own (config: evictionMaxPodGracePeriod)",
		func(to *kubeletv1beta1.KubeletConfiguration) {
			to.EvictionMaxPodGracePeriod = v.EvictionMaxPodGracePeriod
		})
	p.add(&int32Flag{p: v.ImageGCHighThresholdPercent, min: 0, max: 100}, "image-gc-high-threshold",
		"the image filesystem's usage, in percent, from which unused images are collected; 100 turns image GC off (config: imageGCHighThresholdPercent)",
		func(to *kubeletv1beta1.KubeletConfiguration) {
			to.ImageGCHighThresholdPercent = ptr.To(*v.ImageGCHighThresholdPercent)
		})
	p.add(&int32Flag{p: v.ImageGCLowThresholdPercent, min: 0, max: 100}, "image-gc-low-threshold",
		"the usage, in percent, image GC frees down to; below --image-gc-high-threshold (config: imageGCLowThresholdPercent)",
		func(to *kubeletv1beta1.KubeletConfiguration) {
			to.ImageGCLowThresholdPercent = ptr.To(*v.ImageGCLowThresholdPercent)
		})
	minAge := func(to *kubeletv1beta1.KubeletConfiguration) { to.ImageMinimumGCAge = v.ImageMinimumGCAge }
	p.add(&durationFlag{d: &v.ImageMinimumGCAge.Duration}, "minimum-image-ttl-duration",
		"how long an image must be unused before image GC may delete it (config: imageMinimumGCAge)", minAge)
	p.add(&durationFlag{d: &v.ImageMinimumGCAge.Duration}, "minimum-image-gc-age",
		"the course's name for --minimum-image-ttl-duration, after its field imageMinimumGCAge", minAge)
	p.add(&boolFlag{b: v.SerializeImagePulls}, "serialize-image-pulls",
		"pull images one at a time (config: serializeImagePulls)",
		func(to *kubeletv1beta1.KubeletConfiguration) { to.SerializeImagePulls = ptr.To(*v.SerializeImagePulls) })
	v.MaxParallelImagePulls = new(int32)
	p.add(&int32Flag{p: v.MaxParallelImagePulls, min: 1, max: 1<<31 - 1}, "max-parallel-image-pulls",
		"with --serialize-image-pulls=false, how many pulls at once; the course's flag, upstream has only the field (config: maxParallelImagePulls) (default: no limit)",
		func(to *kubeletv1beta1.KubeletConfiguration) {
			to.MaxParallelImagePulls = ptr.To(*v.MaxParallelImagePulls)
		})
	p.add(&int32Flag{p: v.RegistryPullQPS, min: 0, max: 1<<31 - 1}, "registry-qps",
		"image pulls a second at most; 0: no limit (config: registryPullQPS)",
		func(to *kubeletv1beta1.KubeletConfiguration) { to.RegistryPullQPS = ptr.To(*v.RegistryPullQPS) })
	p.add(&int32Flag{p: &v.RegistryBurst, min: 0, max: 1<<31 - 1}, "registry-burst",
		"how many pulls may go at once above --registry-qps (config: registryBurst)",
		func(to *kubeletv1beta1.KubeletConfiguration) { to.RegistryBurst = v.RegistryBurst })
	return p
}

func (p *PressureFlags) add(value flag.Value, name, usage string, copy func(*kubeletv1beta1.KubeletConfiguration)) {
	p.fs.Var(value, name, usage)
	p.copies[name] = copy
}

// ApplyTo copies every one of these flags given on the command line over
// kc. As upstream's defaulting, --max-parallel-image-pulls of 2 or more
// given without --serialize-image-pulls turns serial pulls off.
func (p *PressureFlags) ApplyTo(kc *kubeletv1beta1.KubeletConfiguration) {
	given := map[string]bool{}
	p.fs.Visit(func(fl *flag.Flag) {
		if c, ok := p.copies[fl.Name]; ok {
			c(kc)
			given[fl.Name] = true
		}
	})
	if given["max-parallel-image-pulls"] && !given["serialize-image-pulls"] {
		kc.SerializeImagePulls = ptr.To(*kc.MaxParallelImagePulls < 2)
	}
}

// ValidateNodePressure checks the node pressure fields of a defaulted
// configuration, with upstream's rules: the thresholds as the eviction
// manager reads them (eviction.ParseThresholdConfig: known signals, a
// positive quantity or a percentage, a soft threshold with its grace
// period); 0 <= imageGCLowThresholdPercent <
// imageGCHighThresholdPercent <= 100, the GC ages are not negative and
// imageMaximumGCAge, when set, is above imageMinimumGCAge; the registry's
// rate is not negative; maxParallelImagePulls is positive, and above 1
// only without serial pulls. Validate calls it.
func ValidateNodePressure(kc *kubeletv1beta1.KubeletConfiguration) error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	// The thresholds are read as the eviction manager will read them
	// (upstream's server.go also parses them before it starts).
	if _, err := eviction.ParseThresholdConfig(kc.EvictionHard, kc.EvictionSoft, kc.EvictionSoftGracePeriod, kc.EvictionMinimumReclaim); err != nil {
		errs = append(errs, fmt.Errorf("eviction thresholds: %w", err))
	}
	check(kc.EvictionPressureTransitionPeriod.Duration >= 0, "evictionPressureTransitionPeriod (--eviction-pressure-transition-period) %s must not be negative",
		kc.EvictionPressureTransitionPeriod.Duration)

	if high, low := kc.ImageGCHighThresholdPercent, kc.ImageGCLowThresholdPercent; high != nil && low != nil {
		check(*high >= 0 && *high <= 100, "imageGCHighThresholdPercent (--image-gc-high-threshold) %d must be between 0 and 100, inclusive", *high)
		check(*low >= 0 && *low <= 100, "imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be between 0 and 100, inclusive", *low)
		check(*low < *high, "imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) %d", *low, *high)
	}
	minAge, maxAge := kc.ImageMinimumGCAge.Duration, kc.ImageMaximumGCAge.Duration
	check(minAge >= 0, "imageMinimumGCAge %s must not be negative", minAge)
	check(maxAge >= 0, "imageMaximumGCAge %s must not be negative", maxAge)
	check(maxAge <= 0 || maxAge > minAge, "imageMaximumGCAge %s must be greater than imageMinimumGCAge %s", maxAge, minAge)

	check(kc.RegistryBurst >= 0, "registryBurst (--registry-burst) %d must not be a negative number", kc.RegistryBurst)
	if kc.RegistryPullQPS != nil {
		check(*kc.RegistryPullQPS >= 0, "registryPullQPS (--registry-qps) %d must not be a negative number", *kc.RegistryPullQPS)
	}
	if n := kc.MaxParallelImagePulls; n != nil {
		check(*n >= 1, "maxParallelImagePulls %d must be a positive number", *n)
		check(kc.SerializeImagePulls == nil || !*kc.SerializeImagePulls || *n <= 1,
			"maxParallelImagePulls %d cannot be larger than 1 unless serializeImagePulls (--serialize-image-pulls) is set to false", *n)
	}
	return oneLine(errs)
}

// mapFlag is a flag of comma-separated key<sep>value pairs, as upstream's
// cliflag map flags: the first Set replaces the map it starts with (the
// default), the next ones add to it.
type mapFlag struct {
	m        *map[string]string
	sep      string
	example  string
	replaced bool
}

func (f *mapFlag) String() string {
	if f == nil || f.m == nil {
		return ""
	}
	pairs := make([]string, 0, len(*f.m))
	for _, k := range slices.Sorted(maps.Keys(*f.m)) {
		pairs = append(pairs, k+f.sep+(*f.m)[k])
	}
	return strings.Join(pairs, ",")
}

func (f *mapFlag) Set(s string) error {
	if !f.replaced {
		*f.m = map[string]string{}
		f.replaced = true
	}
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, f.sep)
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return fmt.Errorf("%q: want signal%svalue pairs, comma-separated, such as %s", pair, f.sep, f.example)
		}
		(*f.m)[k] = v
	}
	return nil
}

// durationFlag is a duration that may be zero, not negative. It is no
// flag.Getter, on purpose: mylib/options refuses a zero in the duration
// flags it can see, and zero is a valid age or transition period.
type durationFlag struct{ d *time.Duration }

func (f *durationFlag) String() string {
	if f == nil || f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration such as 30s or 5m, not negative, got %q", s)
	}
	*f.d = d
	return nil
}

// int32Flag is an int32 within [min, max].
type int32Flag struct {
	p        *int32
	min, max int64
}

func (f *int32Flag) String() string {
	if f == nil || f.p == nil {
		return "0"
	}
	return strconv.Itoa(int(*f.p))
}

func (f *int32Flag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < f.min || n > f.max {
		switch {
		case f.min == 0 && f.max == 100:
			return fmt.Errorf("want a percentage, 0-100, got %q", s)
		case f.min >= 0:
			return fmt.Errorf("want a whole number of at least %d, got %q", f.min, s)
		}
		return fmt.Errorf("want a whole number, got %q", s)
	}
	*f.p = int32(n)
	return nil
}

// boolFlag is a bool held by pointer (the field is *bool).
type boolFlag struct{ b *bool }

func (f *boolFlag) IsBoolFlag() bool { return true }

func (f *boolFlag) String() string {
	if f == nil || f.b == nil {
		return "false"
	}
	return strconv.FormatBool(*f.b)
}

func (f *boolFlag) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	*f.b = b
	return nil
}
