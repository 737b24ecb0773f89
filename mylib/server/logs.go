package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// LogOptions are the options of a container's log, as the kubelet reads
// them from the query of /containerLogs (upstream's v1.PodLogOptions,
// turned into k8s.io/cri-client/pkg/logs.LogOptions).
type LogOptions struct {
	// TailLines: only the last lines of the file; nil means all.
	TailLines *int64
	// LimitBytes: stop after this many bytes; nil means no limit.
	LimitBytes *int64
	// Since: skip lines written before.
	Since time.Time
	// Follow: at the end of the file, wait for more while the container runs.
	Follow bool
	// Timestamps: each line starts with its RFC 3339 time.
	Timestamps bool
	// Previous: the log of the container's previous instance.
	Previous bool
}

// BadQueryError is a query /containerLogs cannot decode (400) or whose
// values are not valid (Invalid: 422), as upstream answers them.
type BadQueryError struct {
	Invalid bool
	Err     error
}

func (e *BadQueryError) Error() string { return e.Err.Error() }

// ParseLogOptions reads the query of /containerLogs: follow, previous,
// timestamps (booleans), tailLines (or the older tail, "all" for every
// line), limitBytes, sinceSeconds and sinceTime (RFC 3339), as upstream's
// getContainerLogs decodes and validates a v1.PodLogOptions: a value that
// is not a number or a time is a decode error; a negative tail, a limit or
// since below 1, or both sinceSeconds and sinceTime, are invalid.
func ParseLogOptions(q url.Values, now time.Time) (*LogOptions, error) {
	o := &LogOptions{}
	boolean := func(name string, dst *bool) error {
		v := q.Get(name)
		if v == "" {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return &BadQueryError{Err: fmt.Errorf("%s=%q: want true or false", name, v)}
		}
		*dst = b
		return nil
	}
	integer := func(name string) (*int64, error) {
		v := q.Get(name)
		if v == "" {
			return nil, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, &BadQueryError{Err: fmt.Errorf("%s=%q: want a whole number", name, v)}
		}
		return &n, nil
	}
	for name, dst := range map[string]*bool{"follow": &o.Follow, "previous": &o.Previous, "timestamps": &o.Timestamps} {
		if err := boolean(name, dst); err != nil {
			return nil, err
		}
	}
	tailName := "tailLines"
	if t := q.Get("tail"); t != "" { // the older name; "all" is no tail
		q = cloneValues(q)
		q.Set("tailLines", t)
		if t == "all" {
			q.Del("tailLines")
		}
		tailName = "tail"
	}
	var err error
	if o.TailLines, err = integer("tailLines"); err != nil {
		return nil, err
	}
	if o.LimitBytes, err = integer("limitBytes"); err != nil {
		return nil, err
	}
	sinceSeconds, err := integer("sinceSeconds")
	if err != nil {
		return nil, err
	}
	var sinceTime *time.Time
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, &BadQueryError{Err: fmt.Errorf("sinceTime=%q: want an RFC 3339 time", v)}
		}
		sinceTime = &t
	}
	switch {
	case o.TailLines != nil && *o.TailLines < 0:
		return nil, &BadQueryError{Invalid: true, Err: fmt.Errorf("%s: must be greater than or equal to 0", tailName)}
	case o.LimitBytes != nil && *o.LimitBytes < 1:
		return nil, &BadQueryError{Invalid: true, Err: errors.New("limitBytes: must be greater than 0")}
	case sinceSeconds != nil && sinceTime != nil:
		return nil, &BadQueryError{Invalid: true, Err: errors.New("at most one of sinceTime or sinceSeconds may be specified")}
	case sinceSeconds != nil && *sinceSeconds < 1:
		return nil, &BadQueryError{Invalid: true, Err: errors.New("sinceSeconds: must be greater than 0")}
	}
	if sinceSeconds != nil {
		o.Since = now.Add(-time.Duration(min(*sinceSeconds, math.MaxInt64/int64(time.Second))) * time.Second)
	}
	if sinceTime != nil {
		o.Since = *sinceTime
	}
	return o, nil
}

func cloneValues(q url.Values) url.Values {
	c := url.Values{}
	for k, v := range q {
		c[k] = append([]string(nil), v...)
	}
	return c
}

// PodLogOptions is o as the API's type, for messages.
func (o *LogOptions) PodLogOptions() *v1.PodLogOptions {
	p := &v1.PodLogOptions{Follow: o.Follow, Previous: o.Previous, Timestamps: o.Timestamps, TailLines: o.TailLines, LimitBytes: o.LimitBytes}
	if !o.Since.IsZero() {
		t := metav1.NewTime(o.Since)
		p.SinceTime = &t
	}
	return p
}

// errMaximumWrite ends a read at LimitBytes.
var errMaximumWrite = errors.New("maximum write")

// logWriter writes parsed log lines to stdout or stderr as the options say.
type logWriter struct {
	stdout, stderr io.Writer
	opts           *LogOptions
	remain         int64
}

func (w *logWriter) write(l logLine, addPrefix bool) error {
	if l.time.Before(w.opts.Since) {
		return nil
	}
	line := l.text
	if w.opts.Timestamps && addPrefix {
		line = append([]byte(l.time.Format(time.RFC3339Nano)+" "), line...)
	}
	if int64(len(line)) > w.remain {
		line = line[:w.remain]
	}
	out := w.stdout
	if l.stream == "stderr" {
		out = w.stderr
	}
	n, err := out.Write(line)
	w.remain -= int64(n)
	if err != nil {
		return err
	}
	if w.remain <= 0 {
		return errMaximumWrite
	}
	return nil
}

// logLine is one line of a CRI log file: its text ends with "\n" for a
// full line (tag F), not for a part of a longer one (tag P).
type logLine struct {
	time   time.Time
	stream string
	text   []byte
}

// parseCRILog parses "<RFC3339Nano> <stdout|stderr> <F|P> <text>" (the
// line's own newline, if any, included in text).
func parseCRILog(b []byte) (logLine, error) {
	var l logLine
	ts, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok {
		return l, errors.New("timestamp is not found")
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return l, fmt.Errorf("unexpected timestamp format: %w", err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != "stdout" && string(stream) != "stderr") {
		return l, fmt.Errorf("unexpected stream type %.10q", stream)
	}
	tag, text, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return l, errors.New("log tag is not found")
	}
	tag, _, _ = bytes.Cut(tag, []byte{':'}) // forward compatible: F:more:tags
	if string(tag) == "P" {
		text = bytes.TrimSuffix(text, []byte{'\n'})
	} else if !bytes.HasSuffix(text, []byte{'\n'}) {
		text = append(text[:len(text):len(text)], '\n')
	}
	return logLine{time: t, stream: string(stream), text: text}, nil
}

// tailStart is the offset in f of its last n lines (n < 0: all of it).
func tailStart(f io.ReadSeeker, n int64) (int64, error) {
	if n < 0 {
		return 0, nil
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil || n == 0 {
		return size, err
	}
	const block = 4096
	var seen int64 // newlines found, the last byte's not counted
	buf := make([]byte, block)
	for end := size; end > 0; {
		start := max(end-block, 0)
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return 0, err
		}
		chunk := buf[:end-start]
		if _, err := io.ReadFull(f, chunk); err != nil {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' || start+int64(i) == size-1 {
				continue
			}
			if seen++; seen == n {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil // fewer than n lines: all of them
}

// ContainerRunning says whether a container still runs, for Follow.
type ContainerRunning func(ctx context.Context) (bool, error)

// ReadLogs copies the CRI log file at path to stdout and stderr as opts
// say, as upstream's k8s.io/cri-client/pkg/logs.ReadLogs: tail first,
// then since, timestamps and the byte limit line by line; a partial (P)
// line is written without a newline and gets no time stamp on the part
// that continues it. With Follow, at the end of the file it waits for more
// (looking every poll on clk; upstream waits for fsnotify events or 1 s)
// for as long as running says the container runs, and reopens the file
// when the runtime has recreated it (rotation). A line that does not
// parse is skipped, as upstream does.
func ReadLogs(ctx context.Context, path string, opts *LogOptions, running ContainerRunning, clk clock.Clock, poll time.Duration, stdout, stderr io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("failed to open log file %q: %w", path, err)
	}
	defer func() { f.Close() }()
	tail := int64(-1)
	if opts.TailLines != nil {
		tail = *opts.TailLines
	}
	start, err := tailStart(f, tail)
	if err != nil {
		return fmt.Errorf("failed to tail %d lines of log file %q: %w", tail, path, err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return err
	}
	w := &logWriter{stdout: stdout, stderr: stderr, opts: opts, remain: math.MaxInt64}
	if opts.LimitBytes != nil {
		w.remain = *opts.LimitBytes
	}
	limited := opts.TailLines != nil && !opts.Follow
	left := tail
	r := bufio.NewReader(f)
	newLine := true
	var next *os.File // the new file at path once the log was rotated
	defer func() {
		if next != nil {
			next.Close()
		}
	}()
	for {
		if limited && left <= 0 {
			return nil
		}
		b, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("failed to read log file %q: %w", path, err)
		}
		if err == io.EOF && opts.Follow && next == nil {
			// Give the incomplete line back and wait for the rest.
			if _, err := f.Seek(-int64(len(b)), io.SeekCurrent); err != nil {
				return err
			}
			r.Reset(f)
			more, err := waitLogs(ctx, running, clk, poll)
			if err != nil {
				return err
			}
			// Rotated: the old file may have got lines since this EOF
			// (written before the runtime reopened); they are read first.
			next, _ = reopened(f, path)
			if !more {
				opts = followDone(opts)
			}
			continue
		}
		if err == io.EOF && len(b) == 0 {
			if next == nil {
				return nil
			}
			f.Close()
			f, next = next, nil
			r.Reset(f)
			continue
		}
		// A line, or an incomplete last line (of the file that was
		// rotated, or of a read without Follow): written as it is.
		l, perr := parseCRILog(b)
		if perr == nil {
			if err := w.write(l, newLine); err != nil {
				if errors.Is(err, errMaximumWrite) {
					return nil
				}
				return err
			}
			newLine = len(l.text) == 0 || l.text[len(l.text)-1] == '\n'
			if limited {
				left--
			}
		}
		if err == io.EOF && next == nil {
			return nil
		}
	}
}

// followDone is opts without Follow: the container has ended, so what is
// left in the file is read and then the read ends.
func followDone(o *LogOptions) *LogOptions {
	c := *o
	c.Follow = false
	return &c
}

// waitLogs waits one poll for more output; false when the container no
// longer runs (read to the end, then stop). A cancelled ctx is an error.
func waitLogs(ctx context.Context, running ContainerRunning, clk clock.Clock, poll time.Duration) (bool, error) {
	ok, err := running(ctx)
	if err != nil || !ok {
		return false, err
	}
	t := clk.NewTimer(poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, fmt.Errorf("context cancelled")
	case <-t.C():
		return true, nil
	}
}

// reopened returns path opened again when it is no longer the file f
// (the kubelet rotated the log: renamed f, and the runtime reopened path).
func reopened(f *os.File, path string) (*os.File, bool) {
	fi1, err1 := f.Stat()
	fi2, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || os.SameFile(fi1, fi2) {
		return nil, false
	}
	nf, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	return nf, true
}
