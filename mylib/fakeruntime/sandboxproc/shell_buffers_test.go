package sandboxproc

// TestPrintfSizeIsAnUpperBound: printfSize is never below what the
// interpreter's printf prints, and near it.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"mvdan.cc/sh/v3/expand"
)

func TestPrintfSizeIsAnUpperBound(t *testing.T) {
	for _, v := range []struct {
		format string
		args   []string
	}{
		{"%01000000d", []string{"0"}},
		{"%01000000d", []string{"1", "2", "3"}},
		{strings.Repeat("%01000000d", 5), []string{}}, // printf's arguments: never nil
		{"%s\\n", []string{strings.Repeat("x", 5000), "y"}},
		{"%b|%c|%%|%x|%-8s|\\x41\\0101", []string{"a\\tb", "q", "255", "z"}},
		{"%09999999d", []string{"0"}},
		{"%099999999d", []string{"0"}}, // wider than Go's fmt pads
		{"%q", []string{"stops here"}},
	} {
		out, _, _ := expand.Format(nil, v.format, v.args)
		total := 0
		for args := v.args; ; {
			s, n, err := expand.Format(nil, v.format, args)
			if err != nil {
				break
			}
			total += len(s)
			args = args[n:]
			if n == 0 || len(args) == 0 {
				break
			}
		}
		one, all := printfSize(v.format, v.args)
		assert.GreaterOrEqual(t, one, int64(len(out)), "%q", v.format)
		assert.GreaterOrEqual(t, all, int64(total), "%q", v.format)
		assert.LessOrEqual(t, all, int64(total)+int64(64*(len(v.args)+5)), "%q: near", v.format)
	}
}
