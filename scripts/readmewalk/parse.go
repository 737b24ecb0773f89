// Package readmewalk runs the shell steps of the chapter READMEs as written,
// in order, the way a learner types them: one bash session per README,
// programs "in another terminal" kept in the background, Ctrl-C sent as
// SIGINT, and every marked output block compared with what the commands
// printed. The top-level README.md ("Writing a chapter: the walk markers")
// describes the markers for chapter authors.
package readmewalk

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Action is what a marker asks the walk to do.
type Action string

// The markers, written <!-- walk: ACTION key=value ... --> in the Markdown.
const (
	Run        Action = "run"        // run the next block (sh: each command; console: each "$ " command, checked against its output)
	Background Action = "background" // start the next block's one command in the background, as in a second terminal
	Expect     Action = "expect"     // the next block is the output of a background program (name=), checked when it stops
	Wait       Action = "wait"       // wait until a background program prints a line matching for=REGEX, or (exit) until it exits by itself
	CtrlC      Action = "ctrl-c"     // press Ctrl-C in the terminal of a background program: SIGINT, wait for it to exit
	Skip       Action = "skip"       // do not run the next block; reason= says why
	Observe    Action = "observe"    // the next paragraph is what to observe: the tour prints it, the walk runs nothing
	Needs      Action = "needs"      // chapters="02 03": what must have been walked before this README (scripts/tour.sh NN)
)

var takesBlock = map[Action]bool{Run: true, Background: true, Expect: true, Skip: true, Wait: false, CtrlC: false, Observe: false, Needs: false}

// Step is one marker, with the fenced block that follows it (if the action
// takes one).
type Step struct {
	Action Action
	Attrs  map[string]string
	Lang   string   // the block's info string: sh, console, text, ""
	Block  []string // the block's lines
	Line   int      // the marker's line in the README, from 1
	// Heading is the README's last heading before the marker, without its
	// #s: the tour prints it when it changes.
	Heading string
	// Text is an observe marker's paragraph, on one line.
	Text string
}

// Local reports whether the step runs only on the course's own local
// control plane (local): the tour skips it when it was started with
// KUBECONFIG naming another cluster (kind, a classroom's).
func (s Step) Local() bool { return s.Attrs["local"] == "true" }

// External reports whether the step runs only on another cluster
// (external): the tour runs it only when it was started with KUBECONFIG
// set, and skips it on the local control plane. A README shows with a
// local step and an external one what each kind of cluster prints (the
// local cluster has no node but the learner's; kind has its own).
func (s Step) External() bool { return s.Attrs["external"] == "true" }

// Name is the background program a step refers to.
func (s Step) Name() string { return s.Attrs["name"] }

// Duration returns the attribute key as a duration, or def.
func (s Step) Duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := s.Attrs[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("line %d: %s=%q: %w", s.Line, key, v, err)
	}
	return d, nil
}

func (s Step) String() string {
	return fmt.Sprintf("line %d: walk: %s %v", s.Line, s.Action, s.Attrs)
}

var (
	markerRe = regexp.MustCompile(`^\s*<!--\s*walk:\s*([a-z-]+)(.*?)\s*-->\s*$`)
	attrRe   = regexp.MustCompile(`\s*([a-z-]+)(?:=("(?:[^"\\]|\\.)*"|\S+))?`)
	fenceRe  = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_-]*)")
	headRe   = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*$`)
	chapRe   = regexp.MustCompile(`^[0-9][0-9]$`)
)

// Parse returns the walk steps of a README, in order. A marker that names an
// unknown action, has a malformed attribute, or lacks its block is an error.
func Parse(markdown string) ([]Step, error) {
	lines := strings.Split(markdown, "\n")
	var steps []Step
	heading, inFence := "", ""
	for i := 0; i < len(lines); i++ {
		// Headings outside fenced blocks (a "# comment" in a sh block is
		// not one).
		if f := fenceRe.FindStringSubmatch(lines[i]); f != nil {
			switch {
			case inFence == "":
				inFence = f[1]
			case strings.TrimSpace(lines[i]) == inFence:
				inFence = ""
			}
		} else if h := headRe.FindStringSubmatch(lines[i]); h != nil && inFence == "" {
			heading = h[1]
		}
		m := markerRe.FindStringSubmatch(lines[i])
		if m == nil {
			if t := strings.TrimSpace(lines[i]); strings.HasPrefix(t, "<!--") && strings.Contains(t, "walk:") {
				return nil, fmt.Errorf("line %d: malformed walk marker %q (want <!-- walk: ACTION key=value ... -->)", i+1, lines[i])
			}
			continue
		}
		s := Step{Action: Action(m[1]), Attrs: map[string]string{}, Line: i + 1, Heading: heading}
		needsBlock, known := takesBlock[s.Action]
		if !known {
			return nil, fmt.Errorf("line %d: unknown walk action %q (want run, background, expect, wait, ctrl-c, skip, observe or needs)", i+1, m[1])
		}
		rest := m[2]
		for strings.TrimSpace(rest) != "" {
			a := attrRe.FindStringSubmatchIndex(rest)
			if a == nil || a[0] != 0 || a[1] == 0 {
				return nil, fmt.Errorf("line %d: malformed walk attributes %q", i+1, rest)
			}
			key, val := rest[a[2]:a[3]], "true"
			if a[4] >= 0 {
				val = rest[a[4]:a[5]]
				if strings.HasPrefix(val, `"`) {
					val = strings.ReplaceAll(val[1:len(val)-1], `\"`, `"`)
				}
			}
			s.Attrs[key] = val
			rest = rest[a[1]:]
		}
		if (s.Action == Background || s.Action == Wait || s.Action == CtrlC) && s.Name() == "" {
			return nil, fmt.Errorf("line %d: walk: %s needs name=", i+1, s.Action)
		}
		if s.Action == Wait && s.Attrs["for"] == "" && s.Attrs["exit"] != "true" {
			return nil, fmt.Errorf("line %d: walk: wait needs for=REGEX or exit", i+1)
		}
		if u, ok := s.Attrs["until"]; ok && (s.Action != Background || !chapRe.MatchString(u)) {
			return nil, fmt.Errorf("line %d: walk: until=%q: only a background program has one, a two-digit chapter number", i+1, u)
		}
		if s.Local() && s.External() {
			return nil, fmt.Errorf("line %d: walk: %s is local or external, not both (a step for every cluster has neither)", i+1, s.Action)
		}
		if _, ok := s.Attrs["undo"]; ok && (s.Action != Run || s.Attrs["undo"] == "true") {
			return nil, fmt.Errorf("line %d: walk: undo=\"COMMAND\" goes on a run marker", i+1)
		}
		if s.Action == Skip && s.Attrs["reason"] == "" {
			return nil, fmt.Errorf("line %d: walk: skip needs reason=\"…\"", i+1)
		}
		if s.Action == Needs {
			for _, c := range strings.Fields(s.Attrs["chapters"]) {
				if !chapRe.MatchString(c) {
					return nil, fmt.Errorf("line %d: walk: needs chapters=%q: want two-digit chapter numbers", i+1, s.Attrs["chapters"])
				}
			}
			if len(strings.Fields(s.Attrs["chapters"])) == 0 {
				return nil, fmt.Errorf("line %d: walk: needs needs chapters=\"NN …\"", i+1)
			}
		}
		if s.Action == Observe {
			// The paragraph that follows: its lines up to a blank one.
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
				j++
			}
			var text []string
			for ; j < len(lines) && strings.TrimSpace(lines[j]) != "" && !markerRe.MatchString(lines[j]) && fenceRe.FindStringSubmatch(lines[j]) == nil && !headRe.MatchString(lines[j]); j++ {
				text = append(text, strings.TrimSpace(lines[j]))
			}
			if len(text) == 0 {
				return nil, fmt.Errorf("line %d: walk: observe is not followed by a paragraph", i+1)
			}
			s.Text = strings.Join(text, " ")
		}
		if needsBlock {
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
				j++
			}
			if j == len(lines) {
				return nil, fmt.Errorf("line %d: walk: %s is not followed by a fenced block", i+1, s.Action)
			}
			f := fenceRe.FindStringSubmatch(lines[j])
			if f == nil {
				return nil, fmt.Errorf("line %d: walk: %s is not followed by a fenced block (found %q)", i+1, s.Action, lines[j])
			}
			s.Lang = f[2]
			k := j + 1
			for ; k < len(lines); k++ {
				if strings.TrimSpace(lines[k]) == f[1] {
					break
				}
			}
			if k == len(lines) {
				return nil, fmt.Errorf("line %d: unterminated fenced block", j+1)
			}
			// A block in a list item is indented like its fence.
			indent := len(lines[j]) - len(strings.TrimLeft(lines[j], " "))
			for _, l := range lines[j+1 : k] {
				n := min(indent, len(l)-len(strings.TrimLeft(l, " ")))
				s.Block = append(s.Block, l[n:])
			}
			i = k
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// Commands splits a shell block into the commands a reader types one at a
// time: one per line, lines ending in a backslash joined to the next, blank
// lines and comment lines left out (a trailing comment stays; bash ignores
// it).
func Commands(block []string) []string {
	var cmds []string
	cur := ""
	for _, l := range block {
		if cur == "" && (strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#")) {
			continue
		}
		if strings.HasSuffix(l, `\`) {
			cur += l + "\n"
			continue
		}
		cmds = append(cmds, cur+l)
		cur = ""
	}
	if cur != "" {
		cmds = append(cmds, strings.TrimSuffix(cur, "\n"))
	}
	return cmds
}

// ConsoleCommand is one "$ command" of a console block and the lines that
// follow it up to the next command: what it prints.
type ConsoleCommand struct {
	Command string
	Output  []string
}

// IsConsole reports whether a block is a transcript: its first non-blank
// line starts with "$ ".
func IsConsole(block []string) bool {
	for _, l := range block {
		if strings.TrimSpace(l) != "" {
			return strings.HasPrefix(l, "$ ")
		}
	}
	return false
}

// Console splits a transcript into its commands and their output.
func Console(block []string) []ConsoleCommand {
	var cc []ConsoleCommand
	for _, l := range block {
		if strings.HasPrefix(l, "$ ") {
			cc = append(cc, ConsoleCommand{Command: strings.TrimPrefix(l, "$ ")})
			continue
		}
		if len(cc) > 0 {
			cc[len(cc)-1].Output = append(cc[len(cc)-1].Output, l)
		}
	}
	for i := range cc {
		for len(cc[i].Output) > 0 && strings.TrimSpace(cc[i].Output[len(cc[i].Output)-1]) == "" {
			cc[i].Output = cc[i].Output[:len(cc[i].Output)-1]
		}
	}
	return cc
}
