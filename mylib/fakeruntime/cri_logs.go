package fakeruntime

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// The CRI log format, as containerd writes a container's stdout and stderr
// to its LogPath and as the kubelet (`kubectl logs`) and `crictl logs` read
// it: one line per line of output,
//
//	<RFC3339Nano time> <stdout|stderr> <F|P> <text>
//
// F ends a line of output; P is a part of a line too long for one log line,
// continued by the next P or F line of the same stream.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	// LogTagFull ends a line; LogTagPartial is part of a longer one.
	LogTagFull    = "F"
	LogTagPartial = "P"
	// MaxLogLine is the longest text of one log line; longer output lines
	// are split into P lines (containerd's default buffer, 16 KiB).
	MaxLogLine = 16 * 1024
)

// LogLine is one parsed line of a CRI log file.
type LogLine struct {
	Time    time.Time
	Stream  string // StreamStdout or StreamStderr
	Partial bool   // tag P: the text continues on the stream's next line
	Text    []byte // without the newline
}

// Format is the line as a log file holds it, newline included.
func (l LogLine) Format() []byte {
	tag := LogTagFull
	if l.Partial {
		tag = LogTagPartial
	}
	b := make([]byte, 0, len(l.Text)+48)
	b = l.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, ' ')
	b = append(b, l.Stream...)
	b = append(b, ' ')
	b = append(b, tag...)
	b = append(b, ' ')
	b = append(b, l.Text...)
	return append(b, '\n')
}

// ParseLogLine parses one line of a CRI log file (without its newline).
func ParseLogLine(line []byte) (LogLine, error) {
	var l LogLine
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return l, fmt.Errorf("log line %.40q: no time stamp", line)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return l, fmt.Errorf("log line %.40q: time stamp: %w", line, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != StreamStdout && string(stream) != StreamStderr) {
		return l, fmt.Errorf("log line %.40q: want stream stdout or stderr", line)
	}
	tag, text, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(tag) != LogTagFull && string(tag) != LogTagPartial) {
		return l, fmt.Errorf("log line %.40q: want tag F or P", line)
	}
	if bytes.IndexByte(text, '\n') >= 0 {
		return l, fmt.Errorf("log line %.40q: a newline inside the text", line)
	}
	return LogLine{Time: t, Stream: string(stream), Partial: string(tag) == LogTagPartial, Text: text}, nil
}

// LogEntry is one line of a container's output, joined from its P parts.
type LogEntry struct {
	Time   time.Time // of its last part
	Stream string
	Text   string
}

// ReadLog reads a CRI log file into the container's lines of output, in
// order, each stream's partial lines joined. A malformed line is an error.
func ReadLog(r io.Reader) ([]LogEntry, error) {
	var out []LogEntry
	partial := map[string][]byte{}
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		if len(raw) == 0 && err == io.EOF {
			return out, nil
		}
		if err != nil && err != io.EOF {
			return out, err
		}
		l, err := ParseLogLine(bytes.TrimSuffix(raw, []byte{'\n'}))
		if err != nil {
			return out, fmt.Errorf("line %d: %w", n, err)
		}
		text := append(partial[l.Stream], l.Text...)
		if l.Partial {
			partial[l.Stream] = text
			continue
		}
		delete(partial, l.Stream)
		out = append(out, LogEntry{Time: l.Time, Stream: l.Stream, Text: string(text)})
	}
}

// logFile is a container's log file; its two streams write lines to it.
type logFile struct {
	clock clock.Clock
	path  string

	mu sync.Mutex
	f  *os.File // nil: not open (no LogPath, or closed)
	// sink, if set, receives the lines instead of f (tests).
	sink func([]byte)
}

// openLog opens (creating its directory) the log file at path for
// appending; an empty path gives a log that discards everything.
func openLog(clk clock.Clock, path string) (*logFile, error) {
	l := &logFile{clock: clk, path: path}
	return l, l.reopen()
}

// reopen closes the file and opens path again (ReopenContainerLog: the
// kubelet has renamed the file to rotate it).
func (l *logFile) reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	if l.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	l.f = f
	return nil
}

func (l *logFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

func (l *logFile) write(stream string, partial bool, text []byte) {
	line := LogLine{Time: l.clock.Now(), Stream: stream, Partial: partial, Text: text}.Format()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sink != nil {
		l.sink(line)
	}
	if l.f != nil {
		_, _ = l.f.Write(line) // like containerd, a full disk loses output rather than stopping the container
	}
}

// stream returns the writer of one stream: it cuts what is written into
// lines (and lines longer than MaxLogLine into parts).
func (l *logFile) stream(name string) *logStream {
	return &logStream{log: l, name: name}
}

// logStream is one stream (stdout or stderr) of a container's log.
type logStream struct {
	log  *logFile
	name string

	mu  sync.Mutex
	buf []byte
}

func (s *logStream) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, b...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i >= 0 && i <= MaxLogLine {
			s.log.write(s.name, false, s.buf[:i])
			s.buf = s.buf[i+1:]
		} else if len(s.buf) > MaxLogLine {
			s.log.write(s.name, true, s.buf[:MaxLogLine])
			s.buf = s.buf[MaxLogLine:]
		} else {
			break
		}
	}
	if len(s.buf) == 0 {
		s.buf = nil // let a long line's buffer go
	}
	return len(b), nil
}

// flush writes an unterminated last line as a full line, as containerd
// does when the process's output ends.
func (s *logStream) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) > 0 {
		s.log.write(s.name, false, s.buf)
		s.buf = nil
	}
}

// checkLogPath refuses a container's LogPath that is not a path inside
// its sandbox's log directory (absolute, empty of a name, or with `..`
// that leads out of it): the file is made there, as the CRI asks, and
// nowhere else on the host. "" (no log file) is fine.
func checkLogPath(logPath string) error {
	if logPath == "" || filepath.IsLocal(logPath) {
		return nil
	}
	return fmt.Errorf("log_path %q is not a path inside the sandbox's log directory", logPath)
}
