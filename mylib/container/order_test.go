package container

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNewestFirstThenByID(t *testing.T) {
	type item struct {
		created int64
		id      string
	}
	items := []item{{1, "a"}, {3, "c"}, {3, "b"}, {2, "z"}}
	slices.SortFunc(items, func(a, b item) int { return NewestFirst(a.created, a.id, b.created, b.id) })
	assert.Equal(t, []item{{3, "b"}, {3, "c"}, {2, "z"}, {1, "a"}}, items)
}
