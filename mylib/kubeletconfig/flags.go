package kubeletconfig

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Flags are the kubelet's command-line flags this package knows, under
// upstream's names (cmd/kubelet/app/options). Those that are not
// KubeletConfiguration fields are read here; the rest land in the
// configuration, over the file, when given.
type Flags struct {
	// ConfigFile is --config: the KubeletConfiguration file; "" for none.
	ConfigFile string
	// BootstrapKubeconfig is --bootstrap-kubeconfig: the credentials to ask
	// for a client certificate with when Kubeconfig is missing.
	BootstrapKubeconfig string
	// Kubeconfig is --kubeconfig: the node's own credentials.
	Kubeconfig string
	// CertDir is --cert-dir: where the client and serving certificates go.
	CertDir string
	// NodeIP is --node-ip: the node's InternalIP; nil to choose one.
	NodeIP net.IP
	// HostnameOverride is --hostname-override: the node's name instead of
	// the hostname.
	HostnameOverride string

	fs       *flag.FlagSet
	values   kubeletv1beta1.KubeletConfiguration // where the configuration's flags land
	pressure *PressureFlags                      // the eviction, image GC and pull flags
}

// configFlags copy a configuration flag's value from the flags' copy to
// the configuration; only the flags given on the command line are copied.
var configFlags = map[string]func(to, from *kubeletv1beta1.KubeletConfiguration){
	"rotate-certificates":        func(to, from *kubeletv1beta1.KubeletConfiguration) { to.RotateCertificates = from.RotateCertificates },
	"rotate-server-certificates": func(to, from *kubeletv1beta1.KubeletConfiguration) { to.ServerTLSBootstrap = from.ServerTLSBootstrap },
	"container-runtime-endpoint": func(to, from *kubeletv1beta1.KubeletConfiguration) {
		to.ContainerRuntimeEndpoint = from.ContainerRuntimeEndpoint
	},
	"pod-manifest-path": func(to, from *kubeletv1beta1.KubeletConfiguration) { to.StaticPodPath = from.StaticPodPath },
	"max-pods":          func(to, from *kubeletv1beta1.KubeletConfiguration) { to.MaxPods = from.MaxPods },
	"port":              func(to, from *kubeletv1beta1.KubeletConfiguration) { to.Port = from.Port },
	"address":           func(to, from *kubeletv1beta1.KubeletConfiguration) { to.Address = from.Address },
	"node-status-max-images": func(to, from *kubeletv1beta1.KubeletConfiguration) {
		to.NodeStatusMaxImages = from.NodeStatusMaxImages
	},
	"allowed-unsafe-sysctls": func(to, from *kubeletv1beta1.KubeletConfiguration) {
		to.AllowedUnsafeSysctls = from.AllowedUnsafeSysctls
	},
}

// AddFlags registers the flags on fs, with upstream's names, the node
// pressure flags among them (AddNodePressureFlags), and returns where they
// land. Call KubeletConfiguration after fs.Parse.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.ConfigFile, "config", "", "the kubelet's KubeletConfiguration file ("+APIVersion+"); flags given on the command line win over it")
	fs.StringVar(&f.BootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig with a bootstrap token, used to get a client certificate when --kubeconfig is missing")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "the node's kubeconfig; written from the bootstrap kubeconfig when missing")
	fs.StringVar(&f.CertDir, "cert-dir", "", "directory of the client and serving certificates and keys")
	fs.TextVar(&f.NodeIP, "node-ip", net.IP(nil), "the node's InternalIP (default: chosen by the kubelet)")
	fs.StringVar(&f.HostnameOverride, "hostname-override", "", "the node's name, instead of the hostname")
	v := &f.values
	fs.BoolVar(&v.RotateCertificates, "rotate-certificates", false, "ask for a new client certificate before the current one expires (config: rotateCertificates)")
	fs.BoolVar(&v.ServerTLSBootstrap, "rotate-server-certificates", false, "get the serving certificate through a CSR, and renew it (config: serverTLSBootstrap)")
	fs.StringVar(&v.ContainerRuntimeEndpoint, "container-runtime-endpoint", DefaultContainerRuntimeEndpoint, "the CRI endpoint (config: containerRuntimeEndpoint)")
	fs.StringVar(&v.StaticPodPath, "pod-manifest-path", "", "directory of static pod manifests (config: staticPodPath)")
	fs.Func("max-pods", fmt.Sprintf("how many pods may run on the node (config: maxPods) (default %d)", DefaultMaxPods), func(s string) error {
		var n int32
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			return fmt.Errorf("want a whole number of at least 1, got %q", s)
		}
		v.MaxPods = n
		return nil
	})
	fs.Func("node-status-max-images", fmt.Sprintf("the most images node.status.images lists, largest first; -1: no cap (config: nodeStatusMaxImages) (default %d)", DefaultNodeStatusMaxImages), func(s string) error {
		n, err := ParseNodeStatusMaxImages(s)
		if err != nil {
			return err
		}
		v.NodeStatusMaxImages = &n
		return nil
	})
	fs.Func("port", fmt.Sprintf("the kubelet API's port (config: port) (default %d)", DefaultPort), func(s string) error {
		var n int32
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("want a port, 1-65535, got %q", s)
		}
		v.Port = n
		return nil
	})
	fs.StringVar(&v.Address, "address", DefaultAddress, "the IP the kubelet API listens on (config: address)")
	fs.Func("allowed-unsafe-sysctls", "comma-separated unsafe sysctls or sysctl patterns (ending in *) pods may set besides the safe ones; use at your own risk (config: allowedUnsafeSysctls)", func(s string) error {
		v.AllowedUnsafeSysctls = nil
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				v.AllowedUnsafeSysctls = append(v.AllowedUnsafeSysctls, p)
			}
		}
		return nil
	})
	f.pressure = AddNodePressureFlags(fs)
	return f
}

// KubeletConfiguration is the configuration to run with: the --config file
// if given (else an empty one), upstream's defaults for what it leaves
// unset, then every flag given on the command line over it, as upstream's
// kubeletConfigFlagPrecedence; then checked.
func (f *Flags) KubeletConfiguration() (*kubeletv1beta1.KubeletConfiguration, error) {
	if !f.fs.Parsed() {
		return nil, errors.New("kubelet config: the flags are not parsed yet")
	}
	kc := &kubeletv1beta1.KubeletConfiguration{}
	if f.ConfigFile != "" {
		var err error
		if kc, err = Load(f.ConfigFile); err != nil {
			return nil, err
		}
	}
	SetDefaults(kc)
	f.fs.Visit(func(fl *flag.Flag) {
		if set, ok := configFlags[fl.Name]; ok {
			set(kc, &f.values)
		}
	})
	f.pressure.ApplyTo(kc)
	if err := Validate(kc); err != nil {
		where := "flags"
		if f.ConfigFile != "" {
			where = f.ConfigFile + " and flags"
		}
		return nil, fmt.Errorf("kubelet config (%s): %w", where, err)
	}
	return kc, nil
}

// Validate checks a defaulted configuration (upstream:
// pkg/kubelet/apis/config/validation, for these fields).
func Validate(kc *kubeletv1beta1.KubeletConfiguration) error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(kc.Port >= 1 && kc.Port <= 65535, "port %d: want 1-65535", kc.Port)
	check(net.ParseIP(kc.Address) != nil, "address %q: want an IP address", kc.Address)
	check(kc.MaxPods >= 0, "maxPods %d: must not be negative", kc.MaxPods)
	check(kc.NodeStatusMaxImages == nil || *kc.NodeStatusMaxImages >= -1, "nodeStatusMaxImages %d: want -1 (no cap) or more", ptrValue(kc.NodeStatusMaxImages))
	check(kc.NodeLeaseDurationSeconds >= 1, "nodeLeaseDurationSeconds %d: want at least 1", kc.NodeLeaseDurationSeconds)
	check(kc.NodeStatusUpdateFrequency.Duration > 0 && kc.SyncFrequency.Duration > 0 && kc.FileCheckFrequency.Duration > 0,
		"syncFrequency, fileCheckFrequency and nodeStatusUpdateFrequency must be positive")
	check(*kc.KubeAPIQPS >= 0 && kc.KubeAPIBurst >= 0 && *kc.EventRecordQPS >= 0 && kc.EventBurst >= 0, "kubeAPIQPS, kubeAPIBurst, eventRecordQPS and eventBurst must not be negative")
	_, err := resource.ParseQuantity(kc.ContainerLogMaxSize)
	check(err == nil, "containerLogMaxSize %q: want a quantity such as 10Mi", kc.ContainerLogMaxSize)
	check(*kc.ContainerLogMaxFiles >= 2, "containerLogMaxFiles %d: want at least 2 (the live file and one rotated)", *kc.ContainerLogMaxFiles)
	check(*kc.ContainerLogMaxWorkers >= 1, "containerLogMaxWorkers %d: want at least 1", *kc.ContainerLogMaxWorkers)
	check(kc.ContainerLogMonitorInterval.Duration >= 3*time.Second, "containerLogMonitorInterval %v: want at least 3s", kc.ContainerLogMonitorInterval.Duration)
	mode := kc.Authorization.Mode
	check(mode == kubeletv1beta1.KubeletAuthorizationModeWebhook || mode == kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow,
		"authorization.mode %q: want Webhook or AlwaysAllow", mode)
	if err := ValidateNodePressure(kc); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, validateCgroups(kc)...)
	return oneLine(errs)
}

// validateCgroups checks the container manager's fields: the cgroupfs
// driver only (this kubelet has no systemd driver), enforceNodeAllocatable
// of "pods" or "none" alone, and only with cgroupsPerQOS, as upstream.
func validateCgroups(kc *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	if kc.CgroupDriver != "" && kc.CgroupDriver != DefaultCgroupDriver {
		errs = append(errs, fmt.Errorf("cgroupDriver %q is not supported by this kubelet: only %q", kc.CgroupDriver, DefaultCgroupDriver))
	}
	pods := false
	for _, k := range kc.EnforceNodeAllocatable {
		switch k {
		case "pods":
			pods = true
		case "none":
			if len(kc.EnforceNodeAllocatable) > 1 {
				errs = append(errs, errors.New(`enforceNodeAllocatable: "none" cannot be combined with other values`))
			}
		default:
			errs = append(errs, fmt.Errorf(`enforceNodeAllocatable %q is not supported by this kubelet: only "pods" or "none"`, k))
		}
	}
	if pods && kc.CgroupsPerQOS != nil && !*kc.CgroupsPerQOS {
		errs = append(errs, errors.New("enforceNodeAllocatable pods is not supported unless cgroupsPerQOS is turned on"))
	}
	return errs
}

// ParseNodeStatusMaxImages reads --node-status-max-images: a whole number,
// -1 (no cap) or more.
func ParseNodeStatusMaxImages(s string) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil || n < -1 {
		return 0, fmt.Errorf("want a whole number, -1 (no cap) or more, got %q", s)
	}
	return int32(n), nil
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// oneLine joins errs into one error of one line ("; " between them), nil
// when there are none: a program prints it as its one line.
func oneLine(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	return errors.New(strings.Join(msgs, "; "))
}
