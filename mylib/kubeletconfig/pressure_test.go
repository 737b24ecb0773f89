package kubeletconfig

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// The node pressure defaults are upstream's v1.37 ones: evictionHard from
// pkg/kubelet/eviction/defaults_linux.go, the rest from
// SetDefaults_KubeletConfiguration.
func TestNodePressureDefaultsAreUpstreams(t *testing.T) {
	f, err := parse(t)
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
		"imagefs.available": "15%", "imagefs.inodesFree": "5%"}, kc.EvictionHard)
	assert.Empty(t, kc.EvictionSoft)
	assert.Empty(t, kc.EvictionSoftGracePeriod)
	assert.Empty(t, kc.EvictionMinimumReclaim)
	assert.Equal(t, 5*time.Minute, kc.EvictionPressureTransitionPeriod.Duration)
	assert.Equal(t, int32(0), kc.EvictionMaxPodGracePeriod)
	assert.Equal(t, int32(85), *kc.ImageGCHighThresholdPercent)
	assert.Equal(t, int32(80), *kc.ImageGCLowThresholdPercent)
	assert.Equal(t, 2*time.Minute, kc.ImageMinimumGCAge.Duration)
	assert.Zero(t, kc.ImageMaximumGCAge.Duration, "no collection by age alone")
	assert.True(t, *kc.SerializeImagePulls)
	assert.Nil(t, kc.MaxParallelImagePulls)
	assert.Equal(t, int32(5), *kc.RegistryPullQPS)
	assert.Equal(t, int32(10), kc.RegistryBurst)
}

// Each call gives a map of its own: defaulting one configuration and
// changing its thresholds does not change the next one's.
func TestDefaultEvictionHardIsANewMapEachTime(t *testing.T) {
	a := &kubeletv1beta1.KubeletConfiguration{}
	SetDefaults(a)
	a.EvictionHard["memory.available"] = "1Gi"
	assert.Equal(t, "100Mi", DefaultEvictionHard()["memory.available"])
}

// As upstream: maxParallelImagePulls of 2 or more, with serializeImagePulls
// unset, defaults serial pulls off.
func TestSerializeImagePullsFollowsMaxParallelImagePulls(t *testing.T) {
	kc := &kubeletv1beta1.KubeletConfiguration{MaxParallelImagePulls: ptr.To[int32](3)}
	SetNodePressureDefaults(kc)
	assert.False(t, *kc.SerializeImagePulls)
	kc = &kubeletv1beta1.KubeletConfiguration{MaxParallelImagePulls: ptr.To[int32](1)}
	SetNodePressureDefaults(kc)
	assert.True(t, *kc.SerializeImagePulls)
}

func TestNodePressureFieldsFromTheFile(t *testing.T) {
	f, err := parse(t, "--config", writeConfig(t, header+`
evictionHard:
  memory.available: 200Mi
evictionSoft:
  memory.available: 300Mi
evictionSoftGracePeriod:
  memory.available: 30s
evictionMinimumReclaim:
  memory.available: 50Mi
evictionPressureTransitionPeriod: 30s
evictionMaxPodGracePeriod: 20
imageGCHighThresholdPercent: 70
imageGCLowThresholdPercent: 50
imageMinimumGCAge: 10s
imageMaximumGCAge: 1h
serializeImagePulls: false
maxParallelImagePulls: 3
registryPullQPS: 0
registryBurst: 4
`))
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"memory.available": "200Mi"}, kc.EvictionHard, "a set evictionHard replaces the default whole, as upstream")
	assert.Equal(t, map[string]string{"memory.available": "300Mi"}, kc.EvictionSoft)
	assert.Equal(t, map[string]string{"memory.available": "30s"}, kc.EvictionSoftGracePeriod)
	assert.Equal(t, map[string]string{"memory.available": "50Mi"}, kc.EvictionMinimumReclaim)
	assert.Equal(t, 30*time.Second, kc.EvictionPressureTransitionPeriod.Duration)
	assert.Equal(t, int32(20), kc.EvictionMaxPodGracePeriod)
	assert.Equal(t, int32(70), *kc.ImageGCHighThresholdPercent)
	assert.Equal(t, int32(50), *kc.ImageGCLowThresholdPercent)
	assert.Equal(t, 10*time.Second, kc.ImageMinimumGCAge.Duration)
	assert.Equal(t, time.Hour, kc.ImageMaximumGCAge.Duration)
	assert.False(t, *kc.SerializeImagePulls)
	assert.Equal(t, int32(3), *kc.MaxParallelImagePulls)
	assert.Equal(t, int32(0), *kc.RegistryPullQPS, "an explicit 0 (no limit) is kept")
	assert.Equal(t, int32(4), kc.RegistryBurst)
}

func TestNodePressureFlagsWinOverTheFile(t *testing.T) {
	path := writeConfig(t, header+"evictionHard:\n  memory.available: 200Mi\nimageGCHighThresholdPercent: 70\nregistryBurst: 4\n")
	f, err := parse(t, "--config", path,
		"--eviction-hard", "memory.available<1Gi", "--eviction-hard", "nodefs.available<20%",
		"--eviction-soft", "memory.available<1.5Gi", "--eviction-soft-grace-period", "memory.available=1m30s",
		"--eviction-minimum-reclaim", "imagefs.available=2Gi,memory.available=0",
		"--eviction-pressure-transition-period", "30s", "--eviction-max-pod-grace-period", "-1",
		"--image-gc-high-threshold", "90", "--image-gc-low-threshold", "60", "--minimum-image-ttl-duration", "0",
		"--registry-qps", "2")
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"memory.available": "1Gi", "nodefs.available": "20%"}, kc.EvictionHard,
		"the first --eviction-hard replaces the file's map, the next adds to it")
	assert.Equal(t, map[string]string{"memory.available": "1.5Gi"}, kc.EvictionSoft)
	assert.Equal(t, map[string]string{"memory.available": "1m30s"}, kc.EvictionSoftGracePeriod)
	assert.Equal(t, map[string]string{"imagefs.available": "2Gi", "memory.available": "0"}, kc.EvictionMinimumReclaim)
	assert.Equal(t, 30*time.Second, kc.EvictionPressureTransitionPeriod.Duration)
	assert.Equal(t, int32(-1), kc.EvictionMaxPodGracePeriod)
	assert.Equal(t, int32(90), *kc.ImageGCHighThresholdPercent, "flag over file")
	assert.Equal(t, int32(60), *kc.ImageGCLowThresholdPercent)
	assert.Zero(t, kc.ImageMinimumGCAge.Duration, "0 is a valid minimum age")
	assert.Equal(t, int32(2), *kc.RegistryPullQPS)
	assert.Equal(t, int32(4), kc.RegistryBurst, "not given as a flag: the file's")
	assert.True(t, *kc.SerializeImagePulls, "not given anywhere: the default")
}

// --eviction-hard= with nothing turns every hard threshold off; the
// course's --minimum-image-gc-age is --minimum-image-ttl-duration.
func TestEmptyEvictionHardAndTheMinimumAgeAlias(t *testing.T) {
	f, err := parse(t, "--eviction-hard=", "--minimum-image-gc-age", "15s")
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.NotNil(t, kc.EvictionHard)
	assert.Empty(t, kc.EvictionHard)
	assert.Equal(t, 15*time.Second, kc.ImageMinimumGCAge.Duration)
}

// Parallel pulls asked for on the command line alone turn serial pulls
// off; with --serialize-image-pulls=true too, validation refuses them.
func TestMaxParallelImagePullsFlag(t *testing.T) {
	f, err := parse(t, "--max-parallel-image-pulls", "3")
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, int32(3), *kc.MaxParallelImagePulls)
	assert.False(t, *kc.SerializeImagePulls)

	f, err = parse(t, "--max-parallel-image-pulls", "3", "--serialize-image-pulls=true")
	require.NoError(t, err)
	_, err = f.KubeletConfiguration()
	assert.ErrorContains(t, err, "maxParallelImagePulls 3 cannot be larger than 1 unless serializeImagePulls (--serialize-image-pulls) is set to false")
}

// A flag's bad value is one line naming the flag.
func TestBadNodePressureFlagValues(t *testing.T) {
	for _, tt := range []struct{ args, want string }{
		{"--eviction-hard memory.available=100Mi", `invalid value "memory.available=100Mi" for flag -eviction-hard: "memory.available=100Mi": want signal<value pairs, comma-separated, such as memory.available<100Mi`},
		{"--eviction-soft-grace-period memory.available<30s", `for flag -eviction-soft-grace-period: "memory.available<30s": want signal=value pairs`},
		{"--image-gc-high-threshold 101", `invalid value "101" for flag -image-gc-high-threshold: want a percentage, 0-100, got "101"`},
		{"--image-gc-low-threshold -1", `want a percentage, 0-100`},
		{"--eviction-pressure-transition-period -5s", `for flag -eviction-pressure-transition-period: want a duration such as 30s or 5m, not negative, got "-5s"`},
		{"--max-parallel-image-pulls 0", `for flag -max-parallel-image-pulls: want a whole number of at least 1, got "0"`},
		{"--registry-qps -1", `for flag -registry-qps: want a whole number of at least 0, got "-1"`},
		{"--serialize-image-pulls=maybe", `-serialize-image-pulls`},
	} {
		t.Run(tt.args, func(t *testing.T) {
			_, err := parse(t, strings.Fields(tt.args)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// Upstream's validation, as one clear line naming the field (and the
// flag), the file and the bad value.
func TestNodePressureValidation(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"low not below high", "imageGCHighThresholdPercent: 80\nimageGCLowThresholdPercent: 80\n",
			"imageGCLowThresholdPercent (--image-gc-low-threshold) 80 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 80"},
		{"high above 100", "imageGCHighThresholdPercent: 120\n", "imageGCHighThresholdPercent (--image-gc-high-threshold) 120 must be between 0 and 100, inclusive"},
		{"negative low", "imageGCLowThresholdPercent: -1\n", "imageGCLowThresholdPercent (--image-gc-low-threshold) -1 must be between 0 and 100, inclusive"},
		{"max age not above min age", "imageMinimumGCAge: 5m\nimageMaximumGCAge: 1m\n", "imageMaximumGCAge 1m0s must be greater than imageMinimumGCAge 5m0s"},
		{"negative min age", "imageMinimumGCAge: -1m\n", "imageMinimumGCAge -1m0s must not be negative"},
		{"soft without grace period", "evictionSoft:\n  memory.available: 1Gi\n",
			"grace period must be specified for the soft eviction threshold memory.available"},
		{"unknown signal", "evictionHard:\n  memory.free: 1Gi\n", "eviction thresholds: unsupported eviction signal memory.free"},
		{"percentage above 100", "evictionHard:\n  nodefs.available: 120%\n", "eviction percentage threshold nodefs.available must be <= 100%: 120%"},
		{"zero quantity", "evictionHard:\n  memory.available: \"0\"\n", "eviction threshold memory.available must be positive: 0"},
		{"not a quantity", "evictionHard:\n  memory.available: lots\n", `eviction thresholds: eviction threshold memory.available: `},
		{"bad grace period", "evictionSoft:\n  memory.available: 1Gi\nevictionSoftGracePeriod:\n  memory.available: soon\n",
			`eviction thresholds: eviction grace period memory.available: `},
		{"negative reclaim", "evictionMinimumReclaim:\n  memory.available: -1Mi\n", "negative eviction minimum reclaim specified for memory.available"},
		{"parallel pulls while serial", "serializeImagePulls: true\nmaxParallelImagePulls: 2\n",
			"maxParallelImagePulls 2 cannot be larger than 1 unless serializeImagePulls (--serialize-image-pulls) is set to false"},
		{"no parallel pulls", "maxParallelImagePulls: 0\n", "maxParallelImagePulls 0 must be a positive number"},
		{"negative burst", "registryBurst: -2\n", "registryBurst (--registry-burst) -2 must not be a negative number"},
		{"negative qps", "registryPullQPS: -2\n", "registryPullQPS (--registry-qps) -2 must not be a negative number"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, header+tt.body)
			f, err := parse(t, "--config", path)
			require.NoError(t, err)
			_, err = f.KubeletConfiguration()
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// Two mistakes: both named, on one line.
func TestValidationErrorsShareOneLine(t *testing.T) {
	f, err := parse(t, "--image-gc-high-threshold", "50", "--image-gc-low-threshold", "60", "--eviction-soft", "memory.available<1Gi")
	require.NoError(t, err)
	_, err = f.KubeletConfiguration()
	require.Error(t, err)
	assert.Equal(t, "kubelet config (flags): eviction thresholds: grace period must be specified for the soft eviction threshold memory.available; "+
		"imageGCLowThresholdPercent (--image-gc-low-threshold) 60 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50", err.Error())
}

// The pressure flags alone on a program's own flag set (app's
// NodePressureFlags): only the flags given are copied, over a
// configuration that has its own values.
func TestPressureFlagsApplyOnlyWhatIsGiven(t *testing.T) {
	fs := flag.NewFlagSet("p", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("port", 0, "a flag of the program's own, of a configuration field's name")
	p := AddNodePressureFlags(fs)
	require.NoError(t, fs.Parse([]string{"--port", "1", "--eviction-hard", "memory.available<500Mi", "--image-gc-low-threshold", "40"}))
	kc := &kubeletv1beta1.KubeletConfiguration{Port: 10250, RegistryBurst: 7}
	SetNodePressureDefaults(kc)
	p.ApplyTo(kc)
	assert.Equal(t, map[string]string{"memory.available": "500Mi"}, kc.EvictionHard)
	assert.Equal(t, int32(40), *kc.ImageGCLowThresholdPercent)
	assert.Equal(t, int32(85), *kc.ImageGCHighThresholdPercent, "not given: the default")
	assert.Equal(t, int32(7), kc.RegistryBurst, "not given: the configuration's")
	assert.Equal(t, int32(10250), kc.Port, "the program's --port is not a pressure flag")
	require.NoError(t, ValidateNodePressure(kc))
}

// --help shows upstream's defaults.
func TestNodePressureFlagsShowUpstreamsDefaults(t *testing.T) {
	fs := flag.NewFlagSet("p", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	AddNodePressureFlags(fs)
	fs.PrintDefaults()
	for _, want := range []string{
		"(default imagefs.available<15%,imagefs.inodesFree<5%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%)",
		"(default 5m0s)", "(default 85)", "(default 80)", "(default 2m0s)", "(default true)", "(default 5)", "(default 10)",
	} {
		assert.Contains(t, out.String(), want)
	}
}
