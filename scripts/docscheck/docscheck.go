// Package docscheck keeps chapter READMEs honest: tests call it to check that
// the README's "Expected output" block still matches what the chapter prints.
//
// In a README, the block is the first fenced code block after a heading that
// reads "Expected output". In it:
//   - a line containing "…" stands for any number of lines;
//   - <placeholder> (angle brackets, e.g. <node-name>, <age>) matches any run of
//     non-blank characters;
//   - every other line must appear in the real output, in the same order,
//     after trimming spaces; runs of spaces compare as one space.
package docscheck

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// ExpectedOutput returns the lines of the README's "Expected output" block.
func ExpectedOutput(readmePath string) ([]string, error) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		return nil, err
	}
	return ExpectedOutputOf(string(b), "Expected output")
}

// ExpectedOutputOf returns the lines of the first fenced block after the
// first heading containing heading.
func ExpectedOutputOf(markdown, heading string) ([]string, error) {
	s := bufio.NewScanner(strings.NewReader(markdown))
	inSection, inBlock := false, false
	var lines []string
	for s.Scan() {
		line := s.Text()
		switch {
		case !inSection:
			inSection = strings.HasPrefix(line, "#") && strings.Contains(line, heading)
		case !inBlock && strings.HasPrefix(line, "#"):
			return nil, fmt.Errorf("section %q has no code block", heading)
		case !inBlock && strings.HasPrefix(line, "```"):
			inBlock = true
		case inBlock && strings.HasPrefix(line, "```"):
			return lines, nil
		case inBlock:
			lines = append(lines, line)
		}
	}
	return nil, fmt.Errorf("no code block under a heading %q", heading)
}

var placeholder = regexp.MustCompile(`<[^<>\s]+>`)

// pattern turns one expected line into a regular expression.
func pattern(line string) *regexp.Regexp {
	fields := strings.Fields(line)
	for i, f := range fields {
		parts := placeholder.Split(f, -1)
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		fields[i] = strings.Join(parts, `\S+`)
	}
	return regexp.MustCompile(`^\s*` + strings.Join(fields, `\s+`) + `\s*$`)
}

// Match checks that output contains the expected lines in order. It returns
// an error naming the first expected line that was not found.
func Match(expected []string, output string) error {
	out := strings.Split(output, "\n")
	i := 0
	for _, e := range expected {
		if strings.Contains(e, "…") || strings.TrimSpace(e) == "" {
			continue
		}
		re := pattern(e)
		found := false
		for ; i < len(out); i++ {
			if re.MatchString(out[i]) {
				found = true
				i++
				break
			}
		}
		if !found {
			return fmt.Errorf("the README's expected line %q is not in the output (in order); the output was:\n%s", e, output)
		}
	}
	return nil
}
