package readmewalk

import (
	"fmt"
	"regexp"
	"strings"
)

// How an expected line of a README matches a printed line:
//
//   - the whole line must match; runs of spaces match any run of spaces
//     (kubectl pads its columns to the widest value);
//   - <node-name> is $NODE_NAME; <a|b> is a or b; any other <placeholder>
//     (<time>, <id>, <uid>, <path>, <none>, …) matches any non-empty text;
//   - … inside a line matches any text; a line that is only … matches any run
//     of lines, even none;
//   - example values a README shows literally are read as placeholders:
//     UIDs, RFC 3339 times, long hex hashes, node-csr-<hash> names,
//     system:bootstrap:<id>, 127.0.0.1:<port>, pod IPs (any address of the
//     mock's default range 10.88.0.0/16 or of the local control plane's
//     cluster CIDR 10.128.0.0/12 matches any other of them: which /24 a
//     node gets depends on the nodes registered before it, and a pod
//     started before the node had its podCIDR keeps a 10.88 address), and,
//     in a transcript (Ages), kubectl's ages such as 12s or 5m3s.
var (
	placeholderRe = regexp.MustCompile(`<[A-Za-z][A-Za-z0-9 .-]*(\|[A-Za-z0-9 .-]+)*>`)
	spacesRe      = regexp.MustCompile(`\s+`)
	literalValues = []struct {
		re  *regexp.Regexp
		sub string
	}{
		{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uid>"},
		{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
		{regexp.MustCompile(`\b[0-9a-f]{16,}\b`), "<hash>"},
		{regexp.MustCompile(`node-csr-[A-Za-z0-9_-]{16,}`), "node-csr-<hash>"},
		{regexp.MustCompile(`system:bootstrap:[a-z0-9]{6}\b`), "system:bootstrap:<id>"},
		{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:<port>"},
		{podIPRe, "<pod-ip>"},
	}
	podIPRe = regexp.MustCompile(`\b10\.(?:88|12[89]|13\d|14[0-3])\.\d{1,3}\.\d{1,3}\b`)
	ageRe   = regexp.MustCompile(`(^|\s)\d+(s|m|h|d)(\d+(s|m|h))?(\s|$)`)
)

// Matcher compares README blocks with output.
type Matcher struct {
	NodeName string // what <node-name> stands for; empty: any text
}

func (m Matcher) lineRe(line string, ages bool) *regexp.Regexp {
	line = strings.TrimSpace(line)
	for _, lv := range literalValues {
		line = lv.re.ReplaceAllString(line, lv.sub)
	}
	if ages {
		// Twice: adjacent ages share the space between them.
		line = ageRe.ReplaceAllString(line, "$1<age>$5")
		line = ageRe.ReplaceAllString(line, "$1<age>$5")
	}
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, loc := range placeholderRe.FindAllStringIndex(line, -1) {
		b.WriteString(literal(line[last:loc[0]]))
		ph := line[loc[0]+1 : loc[1]-1]
		switch {
		case ph == "node-name" && m.NodeName != "":
			b.WriteString(regexp.QuoteMeta(m.NodeName))
		case ph == "pod-ip":
			b.WriteString(strings.TrimPrefix(strings.TrimSuffix(podIPRe.String(), `\b`), `\b`))
		case strings.Contains(ph, "|"):
			alts := strings.Split(ph, "|")
			for i := range alts {
				alts[i] = regexp.QuoteMeta(alts[i])
			}
			b.WriteString("(?:" + strings.Join(alts, "|") + ")")
		default:
			b.WriteString(".+?")
		}
		last = loc[1]
	}
	b.WriteString(literal(line[last:]))
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// literal quotes text for a regexp, except that runs of spaces match any
// run of spaces and … matches anything.
func literal(s string) string {
	var parts []string
	for _, p := range strings.Split(s, "…") {
		words := spacesRe.Split(p, -1)
		for i := range words {
			words[i] = regexp.QuoteMeta(words[i])
		}
		parts = append(parts, strings.Join(words, `\s+`))
	}
	return strings.Join(parts, ".*")
}

func isEllipsis(line string) bool { return strings.TrimSpace(line) == "…" }

// Match checks output against the expected lines of a README block; ages
// says whether the block is a kubectl transcript, whose ages vary. It
// returns an error that shows both when they differ.
func (m Matcher) Match(expected []string, output string, ages bool) error {
	out := splitOutput(output)
	var exp []string
	for _, e := range expected {
		if strings.TrimSpace(e) != "" {
			exp = append(exp, e)
		}
	}
	res := make([]*regexp.Regexp, len(exp))
	for i, e := range exp {
		if !isEllipsis(e) {
			res[i] = m.lineRe(e, ages)
		}
	}
	best := 0 // how many expected lines the longest partial match got through, for the message
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if i > best {
			best = i
		}
		if i == len(exp) {
			return j == len(out)
		}
		if res[i] == nil {
			for k := j; k <= len(out); k++ {
				if match(i+1, k) {
					return true
				}
			}
			return false
		}
		return j < len(out) && res[i].MatchString(out[j]) && match(i+1, j+1)
	}
	if match(0, 0) {
		return nil
	}
	hint := "the output has lines the README does not show"
	if best < len(exp) {
		hint = fmt.Sprintf("no match for the README's line %q", exp[best])
	}
	return fmt.Errorf("%s\n--- README expects:\n%s\n--- the commands printed:\n%s", hint, strings.Join(exp, "\n"), strings.Join(out, "\n"))
}

// splitOutput returns the non-blank lines of output, without trailing spaces.
func splitOutput(output string) []string {
	var out []string
	for _, l := range strings.Split(output, "\n") {
		l = strings.TrimRight(l, " \t\r")
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}
