package fleet

import (
	"fmt"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/api/resource"
)

// SetMemoryLimit gives Go's garbage collector a soft limit on the program's
// memory (debug.SetMemoryLimit, what GOMEMLIMIT sets), written as a
// quantity: 80Mi, 100M. Nearing it, the collector runs more often than
// GOGC=100 would (which lets the heap grow to twice what is live), and
// returns freed memory to the system sooner: less RSS for more CPU. It is
// a target, not a cap: a program whose live memory is above it goes on
// (and collects more and more often). "" leaves Go's default (no limit).
func SetMemoryLimit(limit string) error {
	n, err := parseMemoryLimit(limit)
	if err != nil || n == 0 {
		return err
	}
	debug.SetMemoryLimit(n)
	return nil
}

func parseMemoryLimit(limit string) (int64, error) {
	if limit == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(limit)
	if err != nil || q.Sign() <= 0 || q.Value() < 1<<20 {
		return 0, fmt.Errorf("memory limit %q: want a size of at least 1Mi, such as 80Mi", limit)
	}
	return q.Value(), nil
}
