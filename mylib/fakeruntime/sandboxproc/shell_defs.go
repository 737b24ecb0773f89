package sandboxproc

import (
	"strconv"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// The definitions a shell keeps besides its variables, charged with them
// (checkLimits): its aliases (`alias a=…`) and the functions an eval or
// a sourced file defines (`eval "f() { …; }"`, `. /data/f.sh`). The
// interpreter holds both where no handler sees them, so the handlers that
// see `alias`, `unalias`, `unset -f`, `eval` and `.` keep their sizes by
// name. A script's own functions need no charge: they are its text,
// bounded (MaxScriptBytes).
// A definition made in a subshell stays charged after the subshell ends:
// the count errs on the side of the limit.
type definitions struct {
	mu    sync.Mutex
	sizes map[string]int64 // "alias NAME", "func NAME"
	total int64
}

// definitionOverhead is what the interpreter keeps beside a definition's
// text: its parsed words or statements (measured: about 200 bytes for
// an alias's, 600 for a one-line function's).
const definitionOverhead = 1 << 10

func (d *definitions) set(key string, text int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sizes == nil {
		d.sizes = map[string]int64{}
	}
	size := int64(len(key)+text) + definitionOverhead
	d.total += size - d.sizes[key]
	d.sizes[key] = size
}

func (d *definitions) remove(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total -= d.sizes[key]
	delete(d.sizes, key)
}

// removeAliases is `unalias -a`.
func (d *definitions) removeAliases() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, v := range d.sizes {
		if len(k) > 6 && k[:6] == "alias " {
			d.total -= v
			delete(d.sizes, k)
		}
	}
}

func (d *definitions) size() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

// defineFunctions charges the functions that f, an eval's or a sourced
// script, defines, by their text.
func (d *definitions) defineFunctions(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		if fn, ok := n.(*syntax.FuncDecl); ok && fn.Name != nil {
			d.set("func "+fn.Name.Value, int(fn.End().Offset()-fn.Pos().Offset()))
		}
		return true
	})
}

// maxBraceWords is the most words the interpreter makes of one brace
// expansion (expand.BracesSeq: 16Ki; more is an error).
const maxBraceWords = 16 << 10

// braceWords is how many words w's brace expansions make of it
// (`{1..16000}$x` 16000, `{a,b}{c,d}` 4; 1 without braces), at most
// maxBraceWords+1, and the bytes of its text in each (its literal parts,
// the longest element of each brace): `: {1..16000}$x` is 16000 copies
// of $x, built before any command sees them.
func braceWords(w *syntax.Word) (words, text int64) {
	c := *w // SplitBraces replaces the parts
	if !syntax.SplitBraces(&c) {
		return 1, 0
	}
	return bracedParts(c.Parts)
}

func bracedParts(parts []syntax.WordPart) (words, text int64) {
	words = 1
	for _, part := range parts {
		n, t := int64(1), int64(0)
		switch part := part.(type) {
		case *syntax.Lit:
			t = int64(len(part.Value))
		case *syntax.SglQuoted:
			t = int64(len(part.Value))
		case *syntax.BraceExp:
			n, t = braceExp(part)
		}
		words, text = min(words*n, maxBraceWords+1), text+t
	}
	return words, text
}

// braceExp is a brace's words and the bytes of its longest one.
func braceExp(b *syntax.BraceExp) (words, text int64) {
	if b.Sequence {
		lit := func(i int) string {
			if i < len(b.Elems) {
				return b.Elems[i].Lit()
			}
			return ""
		}
		from, to := lit(0), lit(1)
		step, err := strconv.ParseInt(lit(2), 10, 64)
		if err != nil || step == 0 {
			step = 1
		}
		step = max(step, -step)
		a, aerr := strconv.ParseInt(from, 10, 64)
		z, zerr := strconv.ParseInt(to, 10, 64)
		if aerr != nil || zerr != nil { // letters: {a..z}
			if len(from) != 1 || len(to) != 1 {
				return 1, int64(len(from) + len(to) + 4) // not a sequence: kept as written
			}
			a, z = int64(from[0]), int64(to[0])
		}
		return min(max(a-z, z-a)/step+1, maxBraceWords+1), int64(max(len(from), len(to)) + 1)
	}
	words = 0
	for _, e := range b.Elems {
		n, t := bracedParts(e.Parts)
		words, text = min(words+n, maxBraceWords+1), max(text, t)
	}
	return words, text
}
