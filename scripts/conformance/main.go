// Command conformance is the reading half of scripts/conformance.sh: it
// reads the ginkgo JSON report of a run of upstream's [NodeConformance]
// specs and prints what passed of what ran, and the specs that did not
// pass, grouped by the kind of work the kubelet does for them (security
// context, sysctls, probes and hooks, …), each with the first line of its
// failure. Given the report of the same specs on upstream's kubelet
// (--compare), it also prints how many of the specs upstream's kubelet
// passed ours passed, and which it did not: issue 42's goal is 95%.
//
//	conformance report [--label capstone] [--compare UPSTREAM.json] [--goal 95] REPORT.json
//
// It exits 1 when --goal is given and not reached, 2 on bad input.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `usage: conformance report [--label NAME] [--compare OTHER.json] [--compare-label NAME] [--goal PERCENT] REPORT.json`

type options struct {
	label, compare, compareLabel, report string
	goal                                 float64
}

func parse(args []string) (o options, err error) {
	if len(args) == 0 || args[0] != "report" {
		return o, errors.New(usage)
	}
	fs := flag.NewFlagSet("conformance report", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.label, "label", "this kubelet", "the kubelet that ran the specs, as the summary names it")
	fs.StringVar(&o.compare, "compare", "", "the report of the same specs on another kubelet (upstream's)")
	fs.StringVar(&o.compareLabel, "compare-label", "upstream's kubelet", "that kubelet's name")
	fs.Float64Var(&o.goal, "goal", 0, "with --compare: exit 1 unless this percent of the specs the other passed passed here")
	if err := fs.Parse(args[1:]); err != nil {
		return o, fmt.Errorf("%v (%s)", err, usage)
	}
	if fs.NArg() != 1 {
		return o, errors.New(usage)
	}
	o.report = fs.Arg(0)
	if o.goal < 0 || o.goal > 100 {
		return o, fmt.Errorf("--goal %v: a percent, 0 to 100", o.goal)
	}
	if o.goal > 0 && o.compare == "" {
		return o, errors.New("--goal needs --compare (the specs the other kubelet passed)")
	}
	return o, nil
}

func load(path string) ([]spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	specs, _, err := readReport(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return specs, nil
}

func run(args []string, stdout io.Writer) (int, error) {
	o, err := parse(args)
	if err != nil {
		return 2, err
	}
	f, err := os.Open(o.report)
	if err != nil {
		return 2, err
	}
	specs, took, err := readReport(f)
	f.Close()
	if err != nil {
		return 2, fmt.Errorf("%s: %w", o.report, err)
	}
	printReport(stdout, o.label, specs, took)
	if o.compare == "" {
		return 0, nil
	}
	theirs, err := load(o.compare)
	if err != nil {
		return 2, err
	}
	if p := printCompare(stdout, specs, theirs, o.compareLabel); o.goal > 0 && p < o.goal {
		return 1, fmt.Errorf("%.1f%% of the specs %s passed, below the goal of %v%%", p, o.compareLabel, o.goal)
	}
	return 0, nil
}

func main() {
	code, err := run(os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
	}
	os.Exit(code)
}
