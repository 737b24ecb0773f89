package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/mylib/fakeruntime"
)

// TestTheREADMEListsTheUtilities: the README lists the commands of the
// mock's containers on one line; it is fakeruntime.Utilities, so that the
// two cannot drift apart.
func TestTheREADMEListsTheUtilities(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	const prefix = "Commands (`fakeruntime.Utilities`):"
	var line string
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, prefix) {
			require.Empty(t, line, "one line starts with %q", prefix)
			line = strings.TrimPrefix(l, prefix)
		}
	}
	require.NotEmpty(t, line, "the README has a line starting with %q", prefix)
	var listed []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(line, -1) {
		listed = append(listed, m[1])
	}
	assert.Equal(t, slices.Sorted(slices.Values(fakeruntime.Utilities)), listed, "the README's list, in alphabetical order, is fakeruntime.Utilities")
}
