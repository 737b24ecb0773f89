package sandboxproc

import (
	"regexp"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/expand"
)

// wideField is a printf width of 6 digits or more: a megabyte per
// directive, too slow for the fuzzer to format.
var wideField = regexp.MustCompile(`[0-9]{6}`)

// FuzzPrintfSize: for any format and arguments, printfSize is never
// below what the interpreter's printf prints (one application, and all).
func FuzzPrintfSize(f *testing.F) {
	for _, s := range []struct{ format, args string }{
		{"%d", "1 2 3"}, {"%s-%5d|%c%%\\n", "ab 42 xyz"}, {"%b", "a\\tb\\0101"}, {"\\x41\\u00e9\\U0001F600", ""},
		{"%-+ 9x", "255"}, {"%q", "x"}, {"%", ""}, {"%099d%", "1"}, {"%c%c", "é"},
	} {
		f.Add(s.format, s.args)
	}
	f.Fuzz(func(t *testing.T, format, argText string) {
		if len(format) > 256 || len(argText) > 256 || wideField.MatchString(format) {
			return
		}
		args := strings.Fields(argText)
		if args == nil {
			args = []string{}
		}
		one, all := printfSize(format, args)
		total := 0
		for rest := args; ; {
			s, n, err := expand.Format(nil, format, rest)
			if err != nil {
				break
			}
			if int64(len(s)) > one {
				t.Fatalf("printf %q %q: one application printed %d bytes, printfSize said at most %d", format, rest, len(s), one)
			}
			total += len(s)
			rest = rest[n:]
			if n == 0 || len(rest) == 0 {
				break
			}
		}
		if int64(total) > all {
			t.Fatalf("printf %q %q: printed %d bytes, printfSize said at most %d", format, args, total, all)
		}
	})
}

// FuzzRewriteExpansions: a script rewritten for the limits, printed (as
// eval and background jobs print it) and rewritten again, gets no more
// expansion checks: the rewrite never grows a script that goes round.
func FuzzRewriteExpansions(f *testing.F) {
	for _, s := range []string{`x="$a$b"`, "cat <<E\n$a$b\nE", `echo ~/$a$b`, `f() { echo "$1$a$b"; }; f & wait`, `y=${a:-$b}$c`, `eval "z=\$a\$b"`, `x=$(false)"$a$b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		first, err := ParseScript(src)
		if err != nil {
			return
		}
		once := PrintScript(first)
		second, err := ParseScript(once)
		if err != nil {
			t.Fatalf("the rewritten script does not parse: %v\n%s", err, once)
		}
		twice := PrintScript(second)
		if a, b := strings.Count(once, ExpandsCommand), strings.Count(twice, ExpandsCommand); a != b {
			t.Fatalf("%d checks, %d after a second rewrite:\n%s\n---\n%s", a, b, once, twice)
		}
	})
}
