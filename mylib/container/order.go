package container

import (
	"cmp"
	"strings"
)

// NewestFirst orders sandboxes or containers newest first (by creation time
// in nanoseconds), then by ID, so that a list comes out in the same order on
// every call. Pass it each item's creation time and ID; it fits
// slices.SortFunc. The mock runtime's list answers and the CRI client's
// grouping both sort with it.
func NewestFirst(createdA int64, idA string, createdB int64, idB string) int {
	if c := cmp.Compare(createdB, createdA); c != 0 {
		return c
	}
	return strings.Compare(idA, idB)
}
