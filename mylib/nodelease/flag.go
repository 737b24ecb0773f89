package nodelease

import (
	"fmt"
	"time"
)

// DurationSeconds is a flag.Value for a lease duration: a Go duration such
// as "40s" that must be a whole, positive number of seconds, because a
// Lease stores leaseDurationSeconds as an integer.
//
//	d := nodelease.DurationSeconds(nodelease.DefaultLeaseDurationSeconds)
//	fs.Var(&d, "lease-duration", "…")
type DurationSeconds int32

// String prints the duration, e.g. "40s".
func (d *DurationSeconds) String() string { return (time.Duration(*d) * time.Second).String() }

// Set parses a duration such as "40s" or "1m".
func (d *DurationSeconds) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < time.Second || v%time.Second != 0 || v > time.Duration(1<<31-1)*time.Second {
		return fmt.Errorf("must be a whole number of seconds, at least 1s (got %v)", v)
	}
	*d = DurationSeconds(v / time.Second)
	return nil
}
