package sandboxproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
)

// The longer of the utilities a script may run besides the shell's
// builtins, written in Go (see Utilities): env and printenv, sleep, cat,
// ls. proc.exec (shell.go) runs them, and the short ones itself; the
// server commands are in shell_servers.go.

// environ lists the exported variables of env as NAME=value.
func environ(env expand.Environ) []string {
	var out []string
	env.Each(func(name string, vr expand.Variable) bool {
		if vr.Exported && vr.IsSet() {
			out = append(out, name+"="+vr.String())
		}
		return true
	})
	slices.Sort(out)
	return out
}

func (p *proc) printenv(hc interp.HandlerContext, name string, args []string) error {
	if len(args) == 0 {
		for _, kv := range environ(hc.Env) {
			fmt.Fprintln(hc.Stdout, kv)
		}
		return nil
	}
	if name == "env" {
		fmt.Fprintln(hc.Stderr, "env: running a command with env is not supported")
		return interp.NewExitStatus(125)
	}
	missing := false
	for _, a := range args {
		if vr := hc.Env.Get(a); vr.Exported && vr.IsSet() {
			fmt.Fprintln(hc.Stdout, vr.String())
		} else {
			missing = true
		}
	}
	if missing {
		return interp.NewExitStatus(1)
	}
	return nil
}

// sleep waits on the runtime's clock. A SIGKILL ends it (and the script);
// a trapped SIGTERM interrupts it and runs the trap.
func (p *proc) sleep(ctx context.Context, hc interp.HandlerContext, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(hc.Stderr, "sleep: missing operand")
		return interp.NewExitStatus(1)
	}
	var total time.Duration // the sum of the arguments, as GNU sleep's
	for _, a := range args {
		d, err := parseSleep(a)
		if err != nil {
			fmt.Fprintf(hc.Stderr, "sleep: invalid time interval %q\n", a)
			return interp.NewExitStatus(1)
		}
		if d > maxSleep-total {
			d = maxSleep - total // saturate, never overflow
		}
		total += d
	}
	timer := p.clock.NewTimer(total)
	defer timer.Stop()
	resume := p.running.cpu.idle() // a sleep burns no CPU, nor holds a thread
	defer resume()
	for {
		select {
		case <-timer.C():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-p.term:
			if trap, ok := p.pendingTrap(); ok {
				resume()
				if err := hc.Builtin(ctx, []string{"eval", trap}); err != nil {
					return err
				}
				return interp.NewExitStatus(ExitCodeSIGTERM)
			}
			// Ignored: keep sleeping, but stop watching the closed channel.
			select {
			case <-timer.C():
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// parseSleep reads one of sleep's arguments as GNU sleep does: a number
// of seconds, possibly fractional or with an exponent ("1.5", "1e3"), with
// an optional suffix s, m, h or d, or "infinity". A duration too long for a
// time.Duration saturates at maxSleep instead of overflowing into a short
// or negative one.
func parseSleep(s string) (time.Duration, error) {
	s, unit := timeUnit(s, false)
	if strings.EqualFold(s, "infinity") || strings.EqualFold(s, "inf") {
		return maxSleep, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || f < 0 || math.IsNaN(f) {
		return 0, fmt.Errorf("invalid time interval %q", s)
	}
	if d := f * float64(unit); d < float64(maxSleep) {
		return time.Duration(d), nil
	}
	return maxSleep, nil
}

// timeUnit splits the unit off a duration as sleep and stress write it:
// a suffix s, m, h or d (and y, with years) after the number; none is
// seconds.
func timeUnit(s string, years bool) (string, time.Duration) {
	if n := len(s); n > 1 {
		switch s[n-1] {
		case 's':
			return s[:n-1], time.Second
		case 'm':
			return s[:n-1], time.Minute
		case 'h':
			return s[:n-1], time.Hour
		case 'd':
			return s[:n-1], 24 * time.Hour
		case 'y':
			if years {
				return s[:n-1], 365 * 24 * time.Hour
			}
		}
	}
	return s, time.Second
}

// maxSleep is the longest sleep: about 292 years, forever for a container.
const maxSleep = time.Duration(math.MaxInt64)

func (p *proc) cat(ctx context.Context, hc interp.HandlerContext, files []string) error {
	if len(files) == 0 {
		if hc.Stdin != nil {
			_, _ = io.Copy(hc.Stdout, hc.Stdin) // a closed stdout ends cat, as in a shell
		}
		return nil
	}
	failed := false
	for _, f := range files {
		r, err := p.open(ctx, f, os.O_RDONLY, 0)
		if err != nil {
			fmt.Fprintf(hc.Stderr, "cat: %s: %v\n", f, Cause(err))
			failed = true
			continue
		}
		_, err = io.Copy(hc.Stdout, r)
		r.Close()
		if err != nil {
			fmt.Fprintf(hc.Stderr, "cat: %s: %v\n", f, Cause(err))
			failed = true
		}
	}
	if failed {
		return interp.NewExitStatus(1)
	}
	return nil
}

func (p *proc) ls(hc interp.HandlerContext, args []string) error {
	long, all := false, false
	var paths []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			long = long || strings.Contains(a, "l")
			all = all || strings.Contains(a, "a")
			continue
		}
		paths = append(paths, a)
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	failed := false
	for _, name := range paths {
		rel := p.rel(hc.Dir, name)
		fi, err := p.fs.Stat(rel)
		if err != nil {
			fmt.Fprintf(hc.Stderr, "ls: %s: %v\n", name, Cause(err))
			failed = true
			continue
		}
		infos := []fs.FileInfo{fi}
		if fi.IsDir() {
			if infos, err = p.readInfos(rel); err != nil {
				fmt.Fprintf(hc.Stderr, "ls: %s: %v\n", name, Cause(err))
				failed = true
				continue
			}
		}
		for _, i := range infos {
			if !all && strings.HasPrefix(i.Name(), ".") {
				continue
			}
			if long {
				fmt.Fprintf(hc.Stdout, "%s %8d %s %s\n", i.Mode(), i.Size(), i.ModTime().UTC().Format("Jan _2 15:04"), i.Name())
			} else {
				fmt.Fprintln(hc.Stdout, i.Name())
			}
		}
	}
	if failed {
		return interp.NewExitStatus(1)
	}
	return nil
}

func (p *proc) readInfos(rel string) ([]fs.FileInfo, error) {
	return p.fs.ReadDir(rel) // sorted by name
}

// each runs fn on each operand of a file utility (args[0] is its name),
// reports failures as the utility does, and exits 1 if one failed.
func (p *proc) each(hc interp.HandlerContext, args []string, fn func(rel string) error) error {
	if len(args) < 2 {
		fmt.Fprintf(hc.Stderr, "%s: missing operand\n", args[0])
		return interp.NewExitStatus(1)
	}
	failed := false
	for _, a := range args[1:] {
		if err := fn(p.rel(hc.Dir, a)); err != nil {
			fmt.Fprintf(hc.Stderr, "%s: %s: %v\n", args[0], a, Cause(err))
			failed = true
		}
	}
	if failed {
		return interp.NewExitStatus(1)
	}
	return nil
}
