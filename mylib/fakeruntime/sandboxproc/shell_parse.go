package sandboxproc

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The parser is bounded: it recurses on every level of nesting, and a
// stack overflow ends the whole process (every container in it), which no
// recover catches. Every input it reads goes through boundedInput.

// MaxScriptBytes is the longest script the runtime parses (sh -c, eval,
// source, a trap): 128 KiB, Linux's MAX_ARG_STRLEN, the longest argument,
// so the longest script a real sh -c can get.
const MaxScriptBytes = 128 << 10

// maxParseFrames bounds how deep the parser may take the stack of the
// goroutine it runs on, in Go stack frames counted from the goroutine's
// start. The interpreter's parser recurses on every level of nesting,
// with 6 frames (about 800 bytes) for each "(" and 28 for each "(" of an
// arithmetic expression: 327,680 "(" (320 KiB) overflow a 256 MB stack,
// which no recover catches, and so would 128 KiB of "$((((", whose
// length alone is not refused. 50,000 frames are a few MB of stack: room
// for a thousand levels of any construct from a script nested
// MaxStackFrames deep (no real script nests beyond a few dozen).
const maxParseFrames = 5 * MaxStackFrames

// parseChunk is the most boundedInput hands the parser at once: between
// two reads, it can recurse at most one level per byte (29 frames for an
// arithmetic "("), so the stack may pass maxParseFrames by at most
// parseChunk levels before the next read refuses.
const parseChunk = 256

// errNestedTooDeep is the error of a parse refused by maxParseFrames.
var errNestedTooDeep = errors.New("script nested too deep")

// boundedInput is the only input the runtime's parsers read, whatever
// reaches them: a container's command, an exec, sh -c, eval, . and
// source, trap actions, alias values, array subscripts, the interactive
// shell, here-documents (part of their script). It hands the parser at
// most maxScriptBytes (counted from the last complete command, for the
// interactive shell), and before each read it checks that the parser has
// not recursed past maxParseFrames: a deeply nested input is refused by
// the parser's own depth, not by a second grammar that could miss a
// construct. The parser stops at a read error and returns it.
type boundedInput struct {
	r       io.Reader
	n       int
	printed bool // the runtime's own printing of a bounded script: depth only (printScriptChecked)
}

func (b *boundedInput) Read(p []byte) (int, error) {
	if b.n >= MaxScriptBytes && !b.printed {
		return 0, fmt.Errorf("command too long (more than %d bytes): Argument list too long", MaxScriptBytes)
	}
	if parseTooDeep() {
		return 0, errNestedTooDeep
	}
	p = p[:min(len(p), parseChunk)]
	if !b.printed {
		p = p[:min(len(p), MaxScriptBytes-b.n)]
	}
	n, err := b.r.Read(p)
	b.n += n
	return n, err
}

// parseTooDeep reports whether the calling goroutine is maxParseFrames
// deep: a walk of its frames, as deep as it is and at most that far.
func parseTooDeep() bool {
	var pc [1]uintptr
	return runtime.Callers(maxParseFrames, pc[:]) != 0
}

// parseSource parses src as a POSIX shell script, bounded (boundedInput);
// every parse of a whole script goes through here or parseScript.
func parseSource(src string) (*syntax.File, error) {
	if len(src) > MaxScriptBytes {
		return nil, fmt.Errorf("script too long (more than %d bytes): Argument list too long", MaxScriptBytes)
	}
	return syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(&boundedInput{r: strings.NewReader(src)}, "")
}

// ParseScript parses src as a POSIX shell script (parseSource), with its
// background statements rewritten (rewriteJobs).
func ParseScript(src string) (*syntax.File, error) {
	f, err := parseSource(src)
	if err != nil {
		return nil, err
	}
	rewriteJobs(f)
	return f, nil
}

// checkWords checks that src parses as words within the bounds, as the
// interpreter's alias parses its value (bash).
func checkWords(src string) error {
	if len(src) > MaxScriptBytes {
		return fmt.Errorf("value too long (%d bytes, at most %d): Argument list too long", len(src), MaxScriptBytes)
	}
	for _, err := range syntax.NewParser().WordsSeq(&boundedInput{r: strings.NewReader(src)}) {
		if errors.Is(err, errNestedTooDeep) {
			return err
		}
		if err != nil {
			return nil // a syntax error: the interpreter's own parse reports it, no deeper
		}
	}
	return nil
}

// checkArithmetic checks that src parses as an arithmetic expression
// within the bounds, as the interpreter's unset parses an array subscript.
func checkArithmetic(src string) error {
	if len(src) > MaxScriptBytes {
		return fmt.Errorf("subscript too long (%d bytes, at most %d): Argument list too long", len(src), MaxScriptBytes)
	}
	_, err := syntax.NewParser().Arithmetic(&boundedInput{r: strings.NewReader(src)})
	if errors.Is(err, errNestedTooDeep) {
		return err
	}
	return nil // a syntax error: the interpreter's own parse reports it, no deeper
}

// printScriptChecked is f as source text again, for the interpreter to
// parse as bash (eval, . and source, a trap's action): checked to parse as
// bash within maxParseFrames too, so that the interpreter's own parse of
// it, which no bound reaches, nests no deeper than one that was bounded.
// (Its length is not bounded: printing indents.)
func printScriptChecked(f *syntax.File) (string, error) {
	src := PrintScript(f)
	_, err := syntax.NewParser().Parse(&boundedInput{r: strings.NewReader(src), printed: true}, "")
	if errors.Is(err, errNestedTooDeep) {
		return "", err
	}
	return src, nil // parsed, or a syntax error that the interpreter's parse reports
}

// PrintScript is a parsed script as source text again.
func PrintScript(f *syntax.File) string {
	var b strings.Builder
	_ = syntax.NewPrinter().Print(&b, f) // a strings.Builder never fails
	return b.String()
}
