package sandboxproc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// The memory and CPU hogs of the documentation's and the e2e tests' pods:
// polinux/stress's stress and agnhost's stress subcommand. They charge
// their bytes to the container's memory (shell_limits.go) and allocate
// none; stress --cpu burns real CPU, on metered threads (shell_usage.go).

// stress is stress(1) as the Kubernetes docs' examples run it
// (polinux/stress): `stress --vm N --vm-bytes SIZE [--vm-hang S]` holds N
// times SIZE bytes, and `stress --cpu N` keeps N workers spinning, until
// killed or, with --timeout D (seconds; suffixes s, m, h, d, y), for D on
// the runtime's clock. The vm hogs only count their bytes against the
// container's memory: nothing is allocated. The cpu hogs really burn: N
// goroutines, each on an OS thread of its own, counted in the
// container's CPU time (shell_usage.go).
func (p *proc) stress(ctx context.Context, hc interp.HandlerContext, args []string) error {
	workers, cpus, size := int64(0), int64(0), int64(256<<20) // stress's default --vm-bytes
	var timeout time.Duration
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := ""
		if i+1 < len(args) {
			val = args[i+1]
		}
		var err error
		switch a {
		case "--vm", "-m":
			workers, err = strconv.ParseInt(val, 10, 64)
			i++
		case "--cpu", "-c":
			cpus, err = strconv.ParseInt(val, 10, 64)
			i++
		case "--vm-bytes":
			size, err = parseStressSize(val)
			i++
		case "--timeout", "-t":
			timeout, err = parseStressTimeout(val)
			i++
		case "--vm-hang", "--vm-stride":
			_, err = strconv.ParseInt(strings.TrimRight(val, "smhdy"), 10, 64)
			i++
		case "--vm-keep", "-v", "--verbose", "-q", "--quiet":
		default:
			err = errors.New("unknown option")
		}
		if err != nil || workers < 0 || workers > 1<<16 || cpus < 0 || cpus > maxStressCPUs || size < 0 {
			fmt.Fprintf(hc.Stderr, "stress: FAIL: [1] (%s) the mock runtime's stress knows only --cpu N, --vm N --vm-bytes SIZE [--vm-hang S], --timeout D\n", a)
			return interp.NewExitStatus(1)
		}
	}
	if workers == 0 && cpus == 0 {
		fmt.Fprintln(hc.Stderr, "stress: FAIL: [1] no hogs requested (the mock runtime's stress knows only --cpu N and --vm N --vm-bytes SIZE)")
		return interp.NewExitStatus(1)
	}
	fmt.Fprintf(hc.Stdout, "stress: info: [1] dispatching hogs: %d cpu, 0 io, %d vm, 0 hdd\n", cpus, workers)
	total := workers * size
	if size != 0 && total/size != workers {
		total = 1 << 62 // overflowed: more than any limit
	}
	p.running.stress.Add(total)
	defer p.running.stress.Add(-total)
	if p.running.charge(p.rootUsage(), varsSize(hc)) {
		return errOOM
	}
	var stop atomic.Bool
	stopped := make(chan struct{})
	var hogs sync.WaitGroup
	for range cpus {
		hogs.Go(func() {
			defer p.running.cpu.start(stopped)()
			for i := 0; !stop.Load(); i++ { // spins: what a cpu hog does
				if i%hogCheck == 0 {
					p.running.cpu.throttle(stopped) // its CPU limit (shell_usage.go)
				}
			}
		})
	}
	defer func() {
		stop.Store(true)
		close(stopped)
		hogs.Wait()
	}()
	var expired <-chan time.Time
	if timeout > 0 {
		timer := p.clock.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C()
	}
	defer p.running.cpu.idle()() // the parent waits, as stress's does
	// PID 1 ignores SIGTERM without a handler: stress has none.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		fmt.Fprintf(hc.Stdout, "stress: info: [1] successful run completed in %ds\n", int64(timeout/time.Second))
		return nil
	}
}

// hogCheck is how many turns of its spin loop a cpu hog runs between two
// checks of its container's CPU limit: a few microseconds of spinning,
// so a check (a clock read and a lock) costs it a few per cent.
const hogCheck = 1 << 14

// maxStressCPUs bounds stress --cpu: each hog is a thread that burns a
// core, so more than a few dozen only slow down every other container.
const maxStressCPUs = 64

// parseStressTimeout reads stress's --timeout: seconds, or a number with
// a suffix s, m, h, d or y.
func parseStressTimeout(s string) (time.Duration, error) {
	s, unit := timeUnit(s, true)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > int64(maxSleep/unit) {
		return 0, fmt.Errorf("invalid timeout %q", s)
	}
	return time.Duration(v) * unit, nil
}

// parseStressSize reads stress's --vm-bytes: a number with an optional
// suffix B, K, M or G (powers of 1024, either case).
func parseStressSize(s string) (int64, error) {
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'b', 'B':
			s = s[:n-1]
		case 'k', 'K':
			s, mult = s[:n-1], 1<<10
		case 'm', 'M':
			s, mult = s[:n-1], 1<<20
		case 'g', 'G':
			s, mult = s[:n-1], 1<<30
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return v * mult, nil
}

// agnhostStress is agnhost's stress subcommand, the memory hog of the
// Kubernetes e2e node tests' eviction pods:
//
//	agnhost stress --mem-alloc-size 12Mi --mem-alloc-sleep 10s --mem-total 1Gi
//
// takes --mem-alloc-size more memory (default 4Ki), then waits
// --mem-alloc-sleep (default 1ms, on the runtime's clock), until one more
// step would pass --mem-total (default 0), and holds it all until the
// container is stopped: its working set grows step by step. The sizes are
// quantities (12Mi, 100M, 1073741824). As stress --vm, it counts its bytes
// against the container's memory (it is OOM-killed past the limit), it
// does not allocate them; and it burns no CPU: --cpus is refused (stress
// --cpu N burns). Like the Go program it is, it exits on SIGTERM.
func (p *proc) agnhostStress(ctx context.Context, hc interp.HandlerContext, args []string) error {
	opts := map[string]string{"mem-total": "0", "mem-alloc-size": "4Ki", "mem-alloc-sleep": "1ms", "cpus": "0"}
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if _, known := opts[name]; !known || !strings.HasPrefix(args[i], "-") {
			fmt.Fprintf(hc.Stderr, "Error: unknown flag: %s (the mock's agnhost stress knows --mem-total, --mem-alloc-size, --mem-alloc-sleep)\n", args[i])
			return interp.NewExitStatus(1)
		}
		if !hasVal {
			if i+1 >= len(args) {
				fmt.Fprintf(hc.Stderr, "Error: flag needs an argument: %s\n", args[i])
				return interp.NewExitStatus(1)
			}
			i++
			val = args[i]
		}
		opts[name] = val
	}
	total, err1 := parseQuantity(opts["mem-total"])
	step, err2 := parseQuantity(opts["mem-alloc-size"])
	pause, err3 := time.ParseDuration(opts["mem-alloc-sleep"])
	if err := errors.Join(err1, err2, err3); err != nil || pause < 0 {
		fmt.Fprintf(hc.Stderr, "Error: invalid argument: %v\n", err)
		return interp.NewExitStatus(1)
	}
	if opts["cpus"] != "0" {
		fmt.Fprintln(hc.Stderr, "Error: the mock's agnhost stress burns no CPU (--cpus): use stress --cpu N")
		return interp.NewExitStatus(1)
	}
	logf := func(format string, a ...any) { // klog's header, as agnhost logs
		fmt.Fprintf(hc.Stderr, "I%s       1 stress.go] %s\n", p.clock.Now().UTC().Format("0102 15:04:05.000000"), fmt.Sprintf(format, a...))
	}
	logf("Allocating %q memory, in %q chunks, with a %v sleep between allocations", opts["mem-total"], opts["mem-alloc-size"], pause)
	var held int64
	defer func() { p.running.stress.Add(-held) }()
	defer p.running.cpu.idle()() // it sleeps between steps, then waits
	wait := func(d time.Duration) error {
		var expired <-chan time.Time
		if d >= 0 {
			timer := p.clock.NewTimer(d)
			defer timer.Stop()
			expired = timer.C()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.term:
			return interp.NewExitStatus(ExitCodeSIGTERM)
		case <-expired:
			return nil
		}
	}
	for n := step; n > 0 && held+n <= total; {
		p.running.stress.Add(n)
		held += n
		if p.running.charge(p.rootUsage(), varsSize(hc)) {
			return errOOM
		}
		if err := wait(pause); err != nil {
			return err
		}
	}
	logf("Allocated %q memory", opts["mem-total"])
	return wait(-1) // select {}: until stopped
}

// parseQuantity parses a quantity of bytes as agnhost's flags take one
// (resource.Quantity's forms: "100Mi", "1G", "1.5Gi", "512", "1e3"),
// rounded up to a whole byte.
func parseQuantity(s string) (int64, error) {
	num, mult := s, 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || strings.ContainsAny(num, "xXpPnNiI_") {
		return 0, fmt.Errorf("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': %q", s)
	}
	v := math.Ceil(f * mult)
	if v < 0 || v > math.MaxInt64/2 {
		return 0, fmt.Errorf("quantity %q is out of range", s)
	}
	return int64(v), nil
}
