package sandboxproc

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
	"syscall"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// TailPollInterval is how often `tail -f` looks for new lines, as GNU
// tail's default --sleep-interval.
const TailPollInterval = time.Second

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
		_, _ = hc.Stdout.Write(LastLinesOf(hc.Stdin, n))
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
		f, size, err := p.openTail(ctx, name)
		if err != nil {
			fmt.Fprintf(hc.Stderr, "tail: cannot open '%s' for reading: %v\n", name, errText(err))
			failed = true
			if byName {
				break // -F waits for it below
			}
			continue
		}
		start, err := lastLinesOffset(f, size, n)
		if err == nil {
			_, err = io.Copy(hc.Stdout, io.NewSectionReader(f, start, size-start))
		}
		f.Close()
		if err != nil {
			fmt.Fprintf(hc.Stderr, "tail: error reading '%s': %v\n", name, errText(err))
			failed = true
			continue
		}
		if follow {
			return p.follow(ctx, hc, name, size, byName)
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
		timer := p.clock.NewTimer(TailPollInterval)
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
		f, size, err := p.openTail(ctx, name)
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
		case size < offset:
			fmt.Fprintf(hc.Stderr, "tail: %s: file truncated\n", name)
			offset = 0
		}
		if f == nil {
			continue
		}
		if size > offset {
			n, _ := io.Copy(hc.Stdout, io.NewSectionReader(f, offset, size-offset))
			offset += n
		}
		f.Close()
	}
}

// tailFile is a file tail reads: at an offset, and closed.
type tailFile interface {
	io.ReaderAt
	io.Closer
}

// openTail opens a file of the container for tail, with its size now.
func (p *proc) openTail(ctx context.Context, name string) (tailFile, int64, error) {
	if fi, err := p.stat(ctx, name, true); err == nil && fi.IsDir() {
		return nil, 0, &fs.PathError{Op: "open", Path: name, Err: errors.New("Is a directory")}
	}
	f, err := p.open(ctx, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	if file, ok := f.(*os.File); ok {
		if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() {
			return file, fi.Size(), nil
		}
	}
	// Not a regular file (/dev/null): what it holds now, kept in
	// memory, at most as much as tail keeps of its stdin.
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxTailBytes))
	if err != nil {
		return nil, 0, err
	}
	return nopCloser{bytes.NewReader(b)}, int64(len(b)), nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// lastLinesOffset is where the last n lines of the file's first size
// bytes start (a last line without its newline counts), read backwards
// from the end, a chunk at a time: tail -n 1 of a file of gigabytes reads
// its end, not the whole file.
func lastLinesOffset(f io.ReaderAt, size int64, n int) (int64, error) {
	if n == 0 {
		return size, nil
	}
	buf := make([]byte, 64<<10)
	found := 0
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil && err != io.EOF {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' || start+int64(i) == size-1 { // the last line's own newline
				continue
			}
			if found++; found == n {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}

// MaxTailBytes is the most tail keeps of its stdin, which it cannot read
// backwards: the last n lines, or, when they are longer, their last 4 MiB.
const MaxTailBytes = 4 << 20

// LastLinesOf reads r to its end and returns its last n lines, keeping no
// more than they need (at most maxTailBytes) as it reads.
func LastLinesOf(r io.Reader, n int) []byte {
	var kept []byte
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		kept = append(kept, buf[:k]...)
		if len(kept) > 2*MaxTailBytes || err != nil {
			kept = lastLines(kept, n)
			if len(kept) > MaxTailBytes {
				kept = kept[len(kept)-MaxTailBytes:]
			}
			kept = append([]byte(nil), kept...) // let the dropped bytes go
		}
		if err != nil {
			return kept
		}
	}
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

// errText is an error as GNU tail prints it: the system's words, capitalised
// ("No such file or directory").
func errText(err error) string {
	s := Cause(err).Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s = errno.Error()
	}
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
