package nodestatus

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceListFlag is a flag.Value for a list of resources written as the
// kubelet's --system-reserved is: "cpu=500m,memory=1Gi".
type ResourceListFlag v1.ResourceList

// String prints the list sorted by name.
func (f *ResourceListFlag) String() string {
	if f == nil || len(*f) == 0 {
		return ""
	}
	var parts []string
	for name, q := range *f {
		parts = append(parts, string(name)+"="+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Set parses "name=quantity,…"; an empty string means no resources.
func (f *ResourceListFlag) Set(s string) error {
	list := ResourceListFlag{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q is not name=quantity (e.g. cpu=500m,memory=1Gi)", kv)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if q.Sign() < 0 {
			return fmt.Errorf("%s: must not be negative", name)
		}
		list[v1.ResourceName(strings.TrimSpace(name))] = q
	}
	*f = list
	return nil
}
