// Command tour walks the course as a learner does: the top-level README,
// then every chapter's README, in order, running the blocks the walk markers
// mark and printing each command as it is typed, what it printed, and the
// README's observe paragraphs. scripts/tour.sh runs it; so does CI, through
// scripts/readmewalk's TestWalkTheCourse: one telling of the course, one
// engine (package readmewalk).
//
//	tour              README.md and every chapter
//	tour 15 16        README.md, what chapters 15 and 16 need (their
//	                  <!-- walk: needs chapters="…" -->), then 15 and 16
//
// With KUBECONFIG set, the blocks marked local (starting the local control
// plane) are not run: the tour uses that cluster instead.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"mykubelet/scripts/readmewalk"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "tour: %v\n", err)
		return 1
	}
	readmes, err := readmewalk.Plan(root, args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tour: %v\n", err)
		return 2
	}
	scratch, err := os.MkdirTemp(os.Getenv("TMPDIR"), "mykubelet-tour.")
	if err != nil {
		fmt.Fprintf(os.Stderr, "tour: %v\n", err)
		return 1
	}
	log, err := os.Create(filepath.Join(scratch, "walk.log"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tour: %v\n", err)
		return 1
	}
	defer log.Close()
	w := readmewalk.NewWalker(root, scratch, os.Environ(), func(format string, args ...any) {
		fmt.Fprintf(log, time.Now().Format("15:04:05 ")+format+"\n", args...)
	})
	w.Out = os.Stdout
	w.JournalPath = filepath.Join(stateDir(root), "tour.journal")
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		w.External = true
		fmt.Printf("Using the cluster in KUBECONFIG=%s: the steps that start the local control plane are not run.\n", kc)
	}

	// Ctrl-C (or SIGTERM) ends the step running now and what it started,
	// undoes what its README started, and stops the programs "in other
	// terminals" (they have process groups of their own). A second one
	// leaves at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "\ntour: interrupted; stopping the step, and the programs the tour started")
		w.Interrupt()
		<-sigs
		os.Exit(130)
	}()

	// A tour killed before it could clean up left its journal: its
	// programs and its README's undo commands go first.
	w.Recover()

	// What the READMEs build on first use, built now, each build's output
	// shown as it comes: minutes, the first time (the control plane
	// alone: 19 on 2 cores), that no step's timeout allows.
	builds, err := readmewalk.BuildsFor(root, readmes, readmewalk.Builds, w.External, os.Geteuid() == 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tour: %v\n", err)
		return 2
	}
	start := time.Now()
	if err := readmewalk.Prepare(root, os.Environ(), builds, os.Stdout, w.Interrupted()); err != nil {
		fmt.Fprintf(os.Stderr, "\ntour: %v\n", err)
		fmt.Fprintln(os.Stderr, "tour: no step was run; scripts/tour.sh again builds on from what is done (Go's build cache keeps it)")
		if errors.Is(err, readmewalk.ErrInterrupted) {
			return 130
		}
		return 1
	}
	if len(builds) > 0 {
		fmt.Printf("\n=== built in %s: %d builds\n", time.Since(start).Round(time.Second), len(builds))
	}

	for _, r := range readmes {
		t0 := time.Now()
		fmt.Printf("\n\033[1m=== %s\033[0m\n", r)
		if err := w.Walk(r); err != nil {
			fmt.Fprintf(os.Stderr, "\ntour: %v\n", err)
			_ = w.StopAll()
			w.ClearJournal()
			fmt.Fprintf(os.Stderr, "tour: failed; the commands, their output and the background programs' logs are in %s\n", scratch)
			if !w.External {
				fmt.Fprintln(os.Stderr, "tour: the local cluster is left running (scripts/cluster.sh down stops it); scripts/tour.sh again walks on it from the start")
			}
			// Stopping the background programs prints their logs, which
			// can be long: the failure's first and last lines again, last.
			fmt.Fprintf(os.Stderr, "tour: failed in %s: %s\n", r, ends(err.Error(), 300))
			if errors.Is(err, readmewalk.ErrInterrupted) {
				return 130
			}
			return 1
		}
		fmt.Printf("=== %s walked in %s\n", r, time.Since(t0).Round(time.Second))
	}
	running := w.Running()
	if err := w.StopAll(); err != nil {
		// What a program printed is checked when it stops: one still
		// running at the end of a whole tour was left running by a
		// README that should have stopped it.
		fmt.Fprintf(os.Stderr, "tour: programs still running at the end (%v): %v\n", running, err)
		if len(args) == 0 {
			w.ClearJournal()
			return 1
		}
	}
	w.ClearJournal()
	_ = os.RemoveAll(scratch)
	fmt.Printf("\n\033[1m=== Done: %d READMEs walked in %s.\033[0m\n", len(readmes), time.Since(start).Round(time.Second))
	if !w.External {
		fmt.Println("The local cluster is still running, for you to explore; stop it with: scripts/cluster.sh down")
	}
	return 0
}

// stateDir is where the scripts keep generated files (scripts/lib.sh):
// MYKUBELET_STATE_DIR, or .state in the checkout.
func stateDir(root string) string {
	if d := os.Getenv("MYKUBELET_STATE_DIR"); d != "" {
		return d
	}
	return filepath.Join(root, ".state")
}

// ends returns s's first line and, when s has more, its last, each cut
// to at most n bytes.
func ends(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	cut := func(l string) string {
		if len(l) > n {
			return l[:n] + "…"
		}
		return l
	}
	if len(lines) == 1 {
		return cut(lines[0])
	}
	return cut(lines[0]) + " … " + cut(lines[len(lines)-1])
}
