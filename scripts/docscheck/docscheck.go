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
	"errors"
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

// CheckShape checks a chapter README's shape: "# NN — title", a first
// paragraph that starts "In this chapter you will", the level-2 sections
// want in that order (others may come between), a Cleanup with "### Going on
// to the next chapter" and "### Done for the day", and a last line "Next: …".
func CheckShape(markdown string, want []string) error {
	lines := strings.Split(strings.TrimRight(markdown, "\n"), "\n")
	if len(lines) == 0 || !regexp.MustCompile(`^# \d\d — `).MatchString(lines[0]) {
		return fmt.Errorf("the first line should be \"# NN — title\", not %q", lines[0])
	}
	i := 1
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) || !strings.HasPrefix(lines[i], "In this chapter you will") {
		return errors.New(`the first paragraph should start "In this chapter you will"`)
	}
	var h2 []string
	var cleanup []string
	inCleanup, fence := false, false
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
		}
		if fence {
			continue
		}
		if h, ok := strings.CutPrefix(l, "## "); ok {
			h2 = append(h2, strings.TrimSpace(h))
			inCleanup = strings.TrimSpace(h) == "Cleanup"
		}
		if h, ok := strings.CutPrefix(l, "### "); ok && inCleanup {
			cleanup = append(cleanup, strings.TrimSpace(h))
		}
	}
	j := 0
	for _, h := range h2 {
		if j < len(want) && h == want[j] {
			j++
		}
	}
	if j < len(want) {
		return fmt.Errorf("section %q is missing or out of order; the sections are %q, they should include %q in that order", want[j], h2, want)
	}
	if strings.Join(cleanup, "|") != "Going on to the next chapter|Done for the day" {
		return fmt.Errorf(`Cleanup should have "### Going on to the next chapter" and "### Done for the day", has %q`, cleanup)
	}
	if !strings.HasPrefix(lines[len(lines)-1], "Next:") {
		return fmt.Errorf("the last line should be \"Next: …\", not %q", lines[len(lines)-1])
	}
	return nil
}
