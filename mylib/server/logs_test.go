package server

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func ptr(n int64) *int64 { return &n }

// read reads testdata/partial.log (a recorded CRI log: both streams, a line
// in two P/F parts, a line that does not parse) with opts.
func read(t *testing.T, opts LogOptions) (stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	err := ReadLogs(context.Background(), "testdata/partial.log", &opts, nil, clock.RealClock{}, time.Millisecond, &o, &e)
	require.NoError(t, err)
	return o.String(), e.String()
}

func TestReadLogsOptionsOnARecordedFile(t *testing.T) {
	o, e := read(t, LogOptions{})
	assert.Equal(t, "one\na long line in two parts\nthree\nfour\n", o, "P parts joined, the bad line skipped")
	assert.Equal(t, "oops\n", e)

	o, _ = read(t, LogOptions{TailLines: ptr(2)})
	assert.Equal(t, "three\nfour\n", o)
	o, _ = read(t, LogOptions{TailLines: ptr(0)})
	assert.Equal(t, "", o)
	o, e = read(t, LogOptions{TailLines: ptr(100)})
	assert.Equal(t, "one\na long line in two parts\nthree\nfour\n", o, "more than there are: all")
	assert.Equal(t, "oops\n", e)

	since, _ := time.Parse(time.RFC3339, "2026-11-22T10:00:02Z")
	o, e = read(t, LogOptions{Since: since})
	assert.Equal(t, "a long line in two parts\nthree\nfour\n", o)
	assert.Empty(t, e)

	o, _ = read(t, LogOptions{Timestamps: true, Since: since})
	assert.Equal(t, "2026-11-22T10:00:02Z a long line in two parts\n2026-11-22T10:00:03Z three\n2026-11-22T10:00:04Z four\n", o,
		"one time stamp per line of output: the P part's")

	o, e = read(t, LogOptions{LimitBytes: ptr(12)})
	assert.Equal(t, "one\na l", o, "both streams count; cut inside a line")
	assert.Equal(t, "oops\n", e)
}

// TestReadLogsFollowEndsWhenTheContainerEndsAndFollowsRotation: lines
// written while following arrive; the file is renamed and a new one
// started (the kubelet rotates, the runtime reopens): the reader goes on in
// the new file; once the container no longer runs, the rest is read and
// the read ends.
func TestReadLogsFollowEndsWhenTheContainerEndsAndFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	require.NoError(t, os.WriteFile(path, []byte("2026-11-22T10:00:00Z stdout F first\n"), 0o600))
	var mu sync.Mutex
	alive := true
	running := func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return alive, nil
	}
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- ReadLogs(context.Background(), path, &LogOptions{Follow: true}, running, clock.RealClock{}, time.Millisecond, out, out)
	}()
	waitFor(t, out, "first\n")

	appendLine(t, path, "2026-11-22T10:00:01Z stdout P sec")
	appendLine(t, path, "2026-11-22T10:00:01Z stdout F ond")
	waitFor(t, out, "first\nsecond\n")

	require.NoError(t, os.Rename(path, path+".20261122-100002"))
	appendLine(t, path, "2026-11-22T10:00:02Z stdout F after rotation")
	waitFor(t, out, "first\nsecond\nafter rotation\n")

	// The container writes its last words, then ends (in this order: a
	// container that has ended writes nothing more).
	appendLine(t, path, "2026-11-22T10:00:03Z stderr F last words")
	mu.Lock()
	alive = false
	mu.Unlock()
	require.NoError(t, <-done, "the read ends by itself once the container has ended")
	assert.Equal(t, "first\nsecond\nafter rotation\nlast words\n", out.String())
}

// TestReadLogsFollowReadsTheRotatedFileToItsEnd: lines the runtime wrote
// to the old file after the reader reached its end, but before the kubelet
// renamed it and the runtime reopened, are read before the new file's.
func TestReadLogsFollowReadsTheRotatedFileToItsEnd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	require.NoError(t, os.WriteFile(path, []byte("2026-11-22T10:00:00Z stdout F first\n"), 0o600))
	clk := clocktesting.NewFakeClock(time.Now())
	running := func(context.Context) (bool, error) { return true, nil }
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- ReadLogs(ctx, path, &LogOptions{Follow: true}, running, clk, LogPollPeriod, out, out)
	}()
	waitFor(t, out, "first\n")
	for !clk.HasWaiters() { // at the end of the file, waiting a poll
		time.Sleep(time.Millisecond)
	}
	appendLine(t, path, "2026-11-22T10:00:01Z stdout F late")
	require.NoError(t, os.Rename(path, path+".20261122-100001"))
	appendLine(t, path, "2026-11-22T10:00:02Z stdout F after rotation")
	clk.Step(LogPollPeriod)
	waitFor(t, out, "first\nlate\nafter rotation\n")
	cancel()
	<-done
}

func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	_, err = f.WriteString(line + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits (without a deadline of its own: the test's) until out is want.
func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	for out.String() != want {
		if !strings.HasPrefix(want, out.String()) {
			t.Fatalf("output %q, want %q", out.String(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestParseLogOptionsAsUpstreamDecodesAndValidates(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	parse := func(q string) (*LogOptions, error) {
		v, err := url.ParseQuery(q)
		require.NoError(t, err)
		return ParseLogOptions(v, now)
	}
	o, err := parse("follow=true&previous=1&timestamps=true&tailLines=5&limitBytes=100&sinceSeconds=60")
	require.NoError(t, err)
	assert.Equal(t, &LogOptions{Follow: true, Previous: true, Timestamps: true, TailLines: ptr(5), LimitBytes: ptr(100), Since: now.Add(-time.Minute)}, o)

	o, err = parse("sinceTime=2026-11-22T09:00:00Z&tail=3")
	require.NoError(t, err)
	assert.Equal(t, now.Add(-time.Hour), o.Since)
	assert.Equal(t, ptr(3), o.TailLines, "tail is the older name of tailLines")
	o, err = parse("tail=all")
	require.NoError(t, err)
	assert.Nil(t, o.TailLines)

	for q, invalid := range map[string]bool{
		"tailLines=abc": false, "follow=maybe": false, "sinceTime=yesterday": false, "limitBytes=1e3": false,
		"tailLines=-1": true, "limitBytes=0": true, "sinceSeconds=0": true, "sinceSeconds=5&sinceTime=2026-11-22T09:00:00Z": true,
	} {
		_, err := parse(q)
		var bq *BadQueryError
		require.ErrorAs(t, err, &bq, q)
		assert.Equal(t, invalid, bq.Invalid, q)
	}
}

func FuzzParseLogOptions(f *testing.F) {
	for _, s := range []string{"", "follow=true&tailLines=5", "tail=all", "sinceSeconds=9223372036854775807", "sinceTime=2026-11-22T09:00:00Z", "limitBytes=-5", "tailLines=%zz"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		o, err := ParseLogOptions(v, now)
		if err != nil {
			if _, ok := err.(*BadQueryError); !ok {
				t.Fatalf("error %v is not a BadQueryError", err)
			}
			return
		}
		if o.TailLines != nil && *o.TailLines < 0 || o.LimitBytes != nil && *o.LimitBytes < 1 || o.Since.After(now) && v.Get("sinceTime") == "" {
			t.Fatalf("accepted %q as %+v", q, o)
		}
	})
}

// FuzzReadLogs: any file content, any tail and limit: no panic, no more
// than the limit, and no more lines than the tail.
func FuzzReadLogs(f *testing.F) {
	seed, err := os.ReadFile("testdata/partial.log")
	require.NoError(f, err)
	f.Add(seed, int64(2), int64(0))
	f.Add([]byte("2026-11-22T10:00:00Z stdout P x"), int64(-1), int64(3))
	f.Add([]byte("\n\n\n"), int64(1), int64(1))
	f.Fuzz(func(t *testing.T, content []byte, tail, limit int64) {
		path := filepath.Join(t.TempDir(), "0.log")
		require.NoError(t, os.WriteFile(path, content, 0o600))
		opts := &LogOptions{}
		if tail >= 0 {
			opts.TailLines = &tail
		}
		if limit > 0 {
			opts.LimitBytes = &limit
		}
		var out bytes.Buffer
		require.NoError(t, ReadLogs(context.Background(), path, opts, nil, clock.RealClock{}, time.Millisecond, &out, &out))
		if limit > 0 && int64(out.Len()) > limit {
			t.Fatalf("wrote %d bytes, limit %d", out.Len(), limit)
		}
		if tail >= 0 && int64(bytes.Count(out.Bytes(), []byte{'\n'})) > tail {
			t.Fatalf("wrote %d lines, tail %d", bytes.Count(out.Bytes(), []byte{'\n'}), tail)
		}
	})
}
