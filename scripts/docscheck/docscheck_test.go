package docscheck

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const readme = "# Ch\n\n## Expected output\n\nSome text.\n\n```text\nnode <node-name> registered\n…\nlease renewed  at <time>\n```\n\n## Next\n"

func TestExpectedOutputFindsTheBlock(t *testing.T) {
	lines, err := ExpectedOutputOf(readme, "Expected output")
	require.NoError(t, err)
	require.Equal(t, []string{"node <node-name> registered", "…", "lease renewed  at <time>"}, lines)
}

func TestMatchInOrderWithPlaceholders(t *testing.T) {
	lines, _ := ExpectedOutputOf(readme, "Expected output")
	require.NoError(t, Match(lines, "starting\nnode n1 registered\nnoise\n  lease renewed at 10:00:01\n"))
}

func TestMatchFailsOnMissingOrReorderedLines(t *testing.T) {
	lines, _ := ExpectedOutputOf(readme, "Expected output")
	require.Error(t, Match(lines, "node n1 registered\n"))
	require.Error(t, Match(lines, "lease renewed at 10:00:01\nnode n1 registered\n"))
	// A placeholder stands for one word, not for several.
	require.Error(t, Match(lines, "node n1 n2 registered\nlease renewed at 1\n"))
}

func TestNoBlockIsAnError(t *testing.T) {
	_, err := ExpectedOutputOf("# x\n## Expected output\nno block\n## Next\n", "Expected output")
	require.Error(t, err)
}
