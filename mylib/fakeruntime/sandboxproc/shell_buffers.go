package sandboxproc

import (
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// The buffers a script fills, charged as they grow (see limits.charge),
// so that a container is OOM-killed at its limit, not after the runtime's
// heap has grown to gigabytes:
//
//   - a command substitution's output, which the interpreter collects in
//     a strings.Builder that every command inside it writes to: its
//     capacity counts at each command (outputBuffer);
//   - printf's output, which the interpreter builds whole before it
//     writes it (one format's worth at a time; all of it in a command
//     substitution): its size is known from the format and the arguments
//     before it runs (printfSize);
//   - a word's expansion, here-documents included: a word that names
//     variables more than once is a copy of each (`cat <<EOF` with $x forty
//     times is forty copies of x): rewriteExpansions puts before the first
//     a command substitution of expandsCommand with their names, whose
//     call charges their sizes before the copies are made.
//
// Pipes need nothing: the interpreter's pipelines are kernel pipes, whose
// writer waits while they are full.

// outputBuffer is the memory the command's standard output holds once it
// has written n more bytes: the capacity of a command substitution's
// buffer, and, when n do not fit, the larger one it grows to (a quarter
// more than it needs, as Go grows a large slice), which is made while the
// old one is copied; 0 for anything else (a file, a pipe, the log).
func outputBuffer(hc interp.HandlerContext, n int64) int64 {
	b, ok := hc.Stdout.(*strings.Builder)
	if !ok {
		return 0
	}
	size, need := int64(b.Cap()), int64(b.Len())+n
	if need > size {
		size += need + need/4
	}
	return size
}

// predictedOutput is the memory a command of args will take for its
// output before the next check, its standard output's buffer included
// (outputBuffer): printf's (builtinCall finds it behind `builtin` and
// `command`; the interpreter builds one application of its format at a
// time beside the buffer), or the expansions expandsCommand names.
func predictedOutput(hc interp.HandlerContext, args []string) int64 {
	_, call := builtinCall(args)
	switch {
	case len(call) > 1 && call[0] == "printf":
		oneFormat, all := printfSize(call[1], call[2:])
		return oneFormat + outputBuffer(hc, all)
	case len(args) > 1 && args[0] == ExpandsCommand:
		copies, n, names := int64(1), int64(0), args[1:]
		if len(names) >= 4 && names[0] == "-n" && names[2] == "-b" { // a brace expansion's copies, and its text in each
			copies, _ = strconv.ParseInt(names[1], 10, 64)
			n, _ = strconv.ParseInt(names[3], 10, 64)
			names = names[4:]
		}
		for _, name := range names {
			vr := hc.Env.Get(name)
			n += int64(len(vr.Str))
			for _, s := range vr.List {
				n += int64(len(s)) + 1
			}
		}
		return copies*n + outputBuffer(hc, 0)
	}
	return outputBuffer(hc, 0)
}

// maxFormatWidth is the widest field Go's fmt pads to (wider is
// "%!(BADWIDTH)"), which the interpreter's printf formats with.
const maxFormatWidth = 10_000_000

// printfSize is, without building it, how long printf's output is: the
// longest one application of format is (the interpreter's printf builds
// each whole, then writes it), and all of them together. It reads format
// as the interpreter's printf does (expand.Format): escapes, and
// directives of flags, a width and a conversion, each consuming an
// argument; it applies format again while arguments are left. The sizes
// are upper bounds: a number takes at most 24 bytes, an escape at most 4.
func printfSize(format string, args []string) (oneFormat, all int64) {
	for {
		n, consumed := printfOnce(format, args)
		oneFormat, all = max(oneFormat, n), all+n
		args = args[consumed:]
		if consumed == 0 || len(args) == 0 {
			return oneFormat, all
		}
	}
}

// printfOnce is one application of format to args: its size, and how
// many arguments it consumed.
func printfOnce(format string, args []string) (size int64, consumed int) {
	next := func() string {
		if consumed < len(args) {
			consumed++
			return args[consumed-1]
		}
		return ""
	}
	inDirective, width := false, int64(0)
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '\\':
			size += 4 // the longest escape's output (\U a rune's UTF-8)
			i++
		case inDirective:
			switch {
			case c >= '0' && c <= '9':
				width = min(width*10+int64(c-'0'), maxFormatWidth+1)
				continue
			case c == '+' || c == '-' || c == ' ':
				continue
			case c == '%' || c == 'c':
				if c == 'c' {
					next()
				}
				size++
			case strings.IndexByte("sbdiuox", c) >= 0:
				arg := int64(len(next()))
				if c != 's' && c != 'b' {
					arg = 24 // a 64-bit number in octal, with its sign
				}
				if width > maxFormatWidth {
					width = 16 // %!(BADWIDTH)
				}
				size += max(width, arg) + 16
			default:
				return size, consumed // the interpreter stops at an invalid directive
			}
			inDirective = false
		case c == '%':
			inDirective, width = true, 0
		default:
			size++
		}
	}
	return size, consumed
}

// ExpandsCommand is the command rewriteExpansions puts in a word that
// names variables more than once: `$(fakeruntime-expands NAME…)`, or
// that brace expansion copies: `$(fakeruntime-expands -n COPIES -b BYTES
// NAME…)`, BYTES its text in each copy. Its call charges the variables'
// sizes (predictedOutput), times the copies; it prints nothing and
// succeeds (a command substitution's status is $? of an assignment).
const ExpandsCommand = "fakeruntime-expands"

// bracesCharged is the size of a brace expansion without variables from
// which it is charged (a word of it is rewritten): below, a script's
// `{a,b}` runs as written.
const bracesCharged = 1 << 20

// rewriteExpansions rewrites each word of node that names variables more
// than once ($x, ${x}, "$x", ${x:-y}…, not ${#x}), here-documents
// included, or that brace expansion copies (`{1..16000}$x`, or literal
// text copied past bracesCharged), so that its expansion is charged
// before it is made (see the top of this file). The check then runs once
// per brace's word, each time before that word is built. A word it
// rewrote already is left as it is. The one thing the check changes: in
// `x=$(false) y=$a$b`, $? is 0 (the check is the last command
// substitution), where sh says 1.
func rewriteExpansions(node syntax.Node) {
	syntax.Walk(node, func(n syntax.Node) bool {
		w, ok := n.(*syntax.Word)
		if !ok {
			return true
		}
		var names []string
		for _, part := range w.Parts {
			if isExpandsCall(part) {
				return true // rewritten already (a script printed for eval)
			}
			names = appendParamNames(names, part)
		}
		copies, text := braceWords(w)
		braced := copies > 1 && (len(names) > 0 || copies*text > bracesCharged)
		if len(names) < 2 && !braced {
			return true
		}
		// First in the word, so that a command substitution of its own
		// still sets $? of an assignment; after a leading ~, which
		// expands only there.
		first := 0
		if lit, ok := w.Parts[0].(*syntax.Lit); ok && strings.HasPrefix(lit.Value, "~") {
			first = 1
		}
		lit := func(s string) *syntax.Word { return &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{Value: s}}} }
		args := []*syntax.Word{lit(ExpandsCommand)}
		if braced {
			args = append(args, lit("-n"), lit(strconv.FormatInt(copies, 10)), lit("-b"), lit(strconv.FormatInt(text, 10)))
		}
		for _, name := range names {
			args = append(args, lit(name))
		}
		tick := &syntax.CmdSubst{Stmts: []*syntax.Stmt{{Cmd: &syntax.CallExpr{Args: args}}}}
		w.Parts = append(w.Parts[:first:first], append([]syntax.WordPart{tick}, w.Parts[first:]...)...)
		return true
	})
}

// appendParamNames appends the names of the variables part copies whole:
// its parameter expansions, and those in its double quotes.
func appendParamNames(names []string, part syntax.WordPart) []string {
	switch part := part.(type) {
	case *syntax.ParamExp:
		if part.Param != nil && !part.Length && !part.Width && !part.Excl && !part.IsSet && part.Index == nil && part.Slice == nil && syntax.ValidName(part.Param.Value) {
			names = append(names, part.Param.Value)
		}
	case *syntax.DblQuoted:
		for _, p := range part.Parts {
			names = appendParamNames(names, p)
		}
	}
	return names
}

// isExpandsCall reports whether part is rewriteExpansions' command substitution.
func isExpandsCall(part syntax.WordPart) bool {
	cs, ok := part.(*syntax.CmdSubst)
	if !ok || len(cs.Stmts) != 1 {
		return false
	}
	call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	return ok && len(call.Args) > 0 && call.Args[0].Lit() == ExpandsCommand
}
