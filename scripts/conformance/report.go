package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// suiteReport is the part of a ginkgo JSON report (`ginkgo --json-report`)
// this program reads: one suite per element, its specs with their full
// text, state, run time and failure. The field names are ginkgo's
// (github.com/onsi/ginkgo/v2/types.Report and SpecReport); the tutorial
// module does not import ginkgo for them.
type suiteReport struct {
	SuiteDescription string
	SuiteSucceeded   bool
	RunTime          time.Duration
	SpecReports      []specReport
}

type specReport struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	RunTime                 time.Duration
	Failure                 struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

// spec is one spec's outcome: its full text, as `ginkgo --focus` matches it.
type spec struct {
	Text, State, Failure, Where string
	RunTime                     time.Duration
}

// Run reports whether the spec ran (passed, failed, timed out, …), as
// opposed to skipped or pending.
func (s spec) Run() bool { return s.State != "skipped" && s.State != "pending" }

// Passed reports whether it ran and passed.
func (s spec) Passed() bool { return s.State == "passed" }

// readReport reads a ginkgo JSON report: its specs (the It nodes; suite
// set-up failures are kept as specs of their own, named by their node, so
// that a broken BeforeSuite is never a silent 0 of 0) and the suites' run
// time.
func readReport(r io.Reader) ([]spec, time.Duration, error) {
	var suites []suiteReport
	if err := json.NewDecoder(r).Decode(&suites); err != nil {
		return nil, 0, fmt.Errorf("not a ginkgo JSON report: %w", err)
	}
	if len(suites) == 0 {
		return nil, 0, fmt.Errorf("the report holds no suite")
	}
	var specs []spec
	var took time.Duration
	for _, su := range suites {
		took += su.RunTime
		for _, sr := range su.SpecReports {
			text := strings.Join(append(slices.Clone(sr.ContainerHierarchyTexts), sr.LeafNodeText), " ")
			if sr.LeafNodeType != "It" {
				if sr.State == "passed" || sr.State == "skipped" {
					continue // set-up and reporting nodes count only when they fail
				}
				text = strings.TrimSpace(sr.LeafNodeType + " " + text)
			}
			s := spec{Text: text, State: sr.State, RunTime: sr.RunTime}
			if !s.Passed() && s.Run() {
				s.Failure = firstLine(sr.Failure.Message)
				if sr.Failure.Location.FileName != "" {
					s.Where = fmt.Sprintf("%s:%d", filepath.Base(sr.Failure.Location.FileName), sr.Failure.Location.LineNumber)
				}
			}
			specs = append(specs, s)
		}
	}
	return specs, took, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	const max = 200
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// kinds sort a spec into what the kubelet does for it, the first that
// matches its full text; issue 42 names its failures by these kinds.
var kinds = []struct {
	name string
	re   *regexp.Regexp
}{
	{"security context", regexp.MustCompile(`Security Context|privileged|Privileged`)},
	{"sysctls", regexp.MustCompile(`(?i)sysctl`)},
	{"admission", regexp.MustCompile(`PodOSRejection|PodOSNotSupported|admission|OS field`)},
	{"/etc/hosts and hostname", regexp.MustCompile(`(?i)etc/?hosts|hostAliases|hostname`)},
	{"ephemeral containers", regexp.MustCompile(`(?i)ephemeral container`)},
	{"probes and hooks", regexp.MustCompile(`(?i)probing container|lifecycle hook|readiness|liveness|startup probe|prestop|poststart`)},
	{"environment and downward API", regexp.MustCompile(`(?i)variable expansion|downward api|environment|env vars|service env`)},
	{"volumes", regexp.MustCompile(`EmptyDir|Projected|ConfigMap|Secrets|HostPath|(?i)volume|fsGroup`)},
	{"containers and pods", regexp.MustCompile(`Container Runtime|Containers|InitContainer|Init container|Pods|Kubelet|RuntimeClass|restart`)},
}

func kindOf(text string) string {
	for _, k := range kinds {
		if k.re.MatchString(text) {
			return k.name
		}
	}
	return "other"
}

// tally counts the specs by state.
type tally struct {
	Specs, Run, Passed, Failed, TimedOut, Skipped int
}

func count(specs []spec) tally {
	var t tally
	t.Specs = len(specs)
	for _, s := range specs {
		switch {
		case !s.Run():
			t.Skipped++
		case s.Passed():
			t.Run++
			t.Passed++
		case s.State == "timedout":
			t.Run++
			t.TimedOut++
		default:
			t.Run++
			t.Failed++
		}
	}
	return t
}

func percent(part, whole int) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// printReport writes the summary: a line of counts, then the specs that
// did not pass, grouped by kind, each with the first line of its failure.
func printReport(w io.Writer, label string, specs []spec, took time.Duration) {
	t := count(specs)
	fmt.Fprintf(w, "%s: %d passed of %d run (%.0f%%): %d failed, %d timed out; %d skipped; %s\n",
		label, t.Passed, t.Run, percent(t.Passed, t.Run), t.Failed, t.TimedOut, t.Skipped, took.Round(time.Second))
	byKind := map[string][]spec{}
	for _, s := range specs {
		if s.Run() && !s.Passed() {
			k := kindOf(s.Text)
			byKind[k] = append(byKind[k], s)
		}
	}
	names := make([]string, 0, len(byKind))
	for k := range byKind {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(w, "\n%s (%d):\n", k, len(byKind[k]))
		ss := byKind[k]
		slices.SortFunc(ss, func(a, b spec) int { return strings.Compare(a.Text, b.Text) })
		for _, s := range ss {
			state := ""
			if s.State != "failed" {
				state = " [" + s.State + "]"
			}
			fmt.Fprintf(w, "  - %s%s\n", s.Text, state)
			if s.Failure != "" {
				where := ""
				if s.Where != "" {
					where = s.Where + ": "
				}
				fmt.Fprintf(w, "      %s%s\n", where, s.Failure)
			}
		}
	}
}

// printCompare writes how our kubelet does on the specs the other one
// (upstream's, on the same machine) passed: issue 42's goal is 95% of
// them. Specs it passed that ours did not are listed.
func printCompare(w io.Writer, ours, theirs []spec, theirLabel string) float64 {
	state := map[string]string{}
	for _, s := range ours {
		state[s.Text] = s.State
	}
	var passed, total int
	var missed []string
	for _, s := range theirs {
		if !s.Passed() {
			continue
		}
		total++
		switch st := state[s.Text]; st {
		case "passed":
			passed++
		case "":
			missed = append(missed, s.Text+" [not run here]")
		default:
			missed = append(missed, s.Text+" ["+st+"]")
		}
	}
	p := percent(passed, total)
	fmt.Fprintf(w, "\nof the %d specs %s passed, this kubelet passed %d (%.1f%%)\n", total, theirLabel, passed, p)
	slices.Sort(missed)
	for _, m := range missed {
		fmt.Fprintf(w, "  - %s\n", m)
	}
	return p
}
