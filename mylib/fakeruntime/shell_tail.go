package fakeruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// tailPollInterval is how often `tail -f` looks for new lines, as GNU
// tail's default --sleep-interval.
const tailPollInterval = time.Second

// tail prints the last lines of files (or of stdin), as GNU tail does for
// the options pods use: `-n N` (also `-nN` and `-N`), `-f` (follow the
// open file) and `-F` (follow the name: wait for a file that does not exist
// yet, start again when it is truncated or replaced). It follows one file
// at a time, polling on the runtime's clock, until the container stops.
// Like every utility it sees only the container's filesystem.
func (p *proc) tail(ctx context.Context, hc interp.HandlerContext, args []string) error {
	n, follow, byName := 10, false, false
	var files []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-f" || a == "--follow":
			follow = true
		case a == "-F":
			follow, byName = true, true
		case a == "-n" || a == "--lines":
			if i+1 == len(args) {
				fmt.Fprintln(hc.Stderr, "tail: option requires an argument -- 'n'")
				return interp.NewExitStatus(1)
			}
			i++
			a = "-n" + args[i]
			fallthrough
		case strings.HasPrefix(a, "-n") || (len(a) > 1 && a[0] == '-' && a[1] >= '0' && a[1] <= '9'):
			v, err := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(a, "-n"), "-"))
			if err != nil || v < 0 {
				fmt.Fprintf(hc.Stderr, "tail: invalid number of lines: %q\n", strings.TrimPrefix(a, "-n"))
				return interp.NewExitStatus(1)
			}
			n = v
		case a == "--":
			files = append(files, args[i+1:]...)
			i = len(args)
		case len(a) > 1 && a[0] == '-':
			fmt.Fprintf(hc.Stderr, "tail: invalid option -- '%s'\n", strings.TrimLeft(a, "-"))
			return interp.NewExitStatus(1)
		default:
			files = append(files, a)
		}
	}
	if len(files) == 0 {
		if hc.Stdin == nil {
			return nil
		}
		b, _ := io.ReadAll(io.LimitReader(hc.Stdin, maxScriptBytes))
		_, _ = hc.Stdout.Write(lastLines(b, n))
		return nil
	}
	if follow && len(files) > 1 {
		fmt.Fprintln(hc.Stderr, "tail: the mock runtime follows one file at a time")
		return interp.NewExitStatus(1)
	}
	failed := false
	for i, name := range files {
		if len(files) > 1 {
			if i > 0 {
				fmt.Fprintln(hc.Stdout)
			}
			fmt.Fprintf(hc.Stdout, "==> %s <==\n", name)
		}
		b, err := p.readWhole(ctx, name)
		if err != nil {
			fmt.Fprintf(hc.Stderr, "tail: cannot open '%s' for reading: %v\n", name, errText(err))
			failed = true
			if byName {
				break // -F waits for it below
			}
			continue
		}
		_, _ = hc.Stdout.Write(lastLines(b, n))
		if follow {
			return p.follow(ctx, hc, name, int64(len(b)), byName)
		}
	}
	if byName {
		return p.follow(ctx, hc, files[0], -1, true)
	}
	if failed {
		return interp.NewExitStatus(1)
	}
	return nil
}

// follow prints what is appended to name from offset on (offset -1: the
// file does not exist yet), every tailPollInterval, until the container
// stops. byName (-F) reopens the file when it is truncated, removed or
// appears, with GNU tail's messages; -f keeps reading what it opened.
func (p *proc) follow(ctx context.Context, hc interp.HandlerContext, name string, offset int64, byName bool) error {
	resume := p.running.cpu.idle() // waiting burns no CPU
	defer resume()
	term := p.term
	for {
		timer := p.clock.NewTimer(tailPollInterval)
		select {
		case <-timer.C():
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-term:
			timer.Stop()
			if trap, ok := p.pendingTrap(); ok {
				resume()
				if err := hc.Builtin(ctx, []string{"eval", trap}); err != nil {
					return err
				}
				return interp.NewExitStatus(ExitCodeSIGTERM)
			}
			term = nil // ignored, as sleep: go on, no longer watching the closed channel
			continue
		}
		b, err := p.readWhole(ctx, name)
		switch {
		case err != nil && offset >= 0:
			if !byName {
				continue // -f: the open file is gone; nothing more will come
			}
			fmt.Fprintf(hc.Stderr, "tail: '%s' has become inaccessible: %v\n", name, errText(err))
			offset = -1
			continue
		case err != nil:
			continue
		case offset < 0:
			fmt.Fprintf(hc.Stderr, "tail: '%s' has appeared;  following new file\n", name)
			offset = 0
		case int64(len(b)) < offset:
			fmt.Fprintf(hc.Stderr, "tail: %s: file truncated\n", name)
			offset = 0
		}
		if int64(len(b)) > offset {
			_, _ = hc.Stdout.Write(b[offset:])
			offset = int64(len(b))
		}
	}
}

// readWhole reads a file of the container, at most maxScriptBytes of it.
func (p *proc) readWhole(ctx context.Context, name string) ([]byte, error) {
	if fi, err := p.stat(ctx, name, true); err == nil && fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("Is a directory")}
	}
	f, err := p.open(ctx, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxScriptBytes))
}

// lastLines returns the last n lines of b (a last line without its newline
// counts).
func lastLines(b []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(b[:end], '\n')
		if j < 0 {
			return b
		}
		end = j
	}
	return b[end+1:]
}
