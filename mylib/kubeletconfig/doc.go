// Package kubeletconfig reads the kubelet's --config file, a
// KubeletConfiguration of kubelet.config.k8s.io/v1beta1 in the published
// types (k8s.io/kubelet/config/v1beta1), as cmd/kubelet/app does: strictly
// (an unknown or repeated field is an error naming it and the file),
// relative paths resolved against the file's directory, upstream's
// defaults for what is unset (pkg/kubelet/apis/config/v1beta1/defaults.go),
// then the flags given on the command line over the file, then checks.
//
//	fs := flag.NewFlagSet("mykubelet", flag.ContinueOnError)
//	f := kubeletconfig.AddFlags(fs)
//	if err := fs.Parse(os.Args[1:]); err != nil { … }
//	kc, err := f.KubeletConfiguration() // --config, defaults, flags over file
//
// Where it departs from upstream, and why:
//   - A field this Kubelet does not implement is refused with an error
//     naming it (Supported lists the rest), where upstream accepts every
//     field: a setting silently ignored would mislead a learner.
//   - Flags are Go's flag package, not pflag, as everywhere in this
//     repository; only the flags listed in AddFlags exist.
//   - The defaults are applied to the published v1beta1 type itself; there
//     is no internal type and no conversion. evictionHard's default
//     (DefaultEvictionHard) is set by SetDefaults, where upstream sets it
//     when it loads the file; mergeDefaultEvictionSettings is not
//     supported: a set evictionHard replaces the default whole.
//   - The eviction thresholds are checked here (ValidateNodePressure), so a
//     bad one is refused with the file's other mistakes; upstream finds it
//     when the kubelet starts (eviction.ParseThresholdConfig).
//   - Two flags are the course's: --max-parallel-image-pulls (upstream has
//     only the field) and --minimum-image-gc-age, another name for
//     upstream's --minimum-image-ttl-duration.
package kubeletconfig
