package kuberuntime

import (
	"errors"
	"flag"
	"time"
)

// AddFlags registers the policy's fields as flags, under the kubelet's
// names and with p's values as defaults (DefaultGCPolicy: upstream's).
func (p *GCPolicy) AddFlags(fs *flag.FlagSet) {
	fs.Var((*minAge)(&p.MinAge), "minimum-container-ttl-duration", "minimum age of a dead container before it is collected, e.g. 10s (0: at once)")
	fs.IntVar(&p.MaxPerPodContainer, "maximum-dead-containers-per-container", p.MaxPerPodContainer, "dead containers kept per pod and container name (negative: no limit)")
	fs.IntVar(&p.MaxContainers, "maximum-dead-containers", p.MaxContainers, "dead containers kept on the node (negative: no limit)")
}

// minAge is a duration flag that may be zero but not negative. (It is no
// flag.Getter, so the check that periods are positive leaves it alone.)
type minAge time.Duration

func (v *minAge) String() string { return time.Duration(*v).String() }

func (v *minAge) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*v = minAge(d)
	return nil
}
