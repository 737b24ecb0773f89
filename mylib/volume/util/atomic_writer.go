// Package util holds what several volume plugins share; today that is the
// AtomicWriter, upstream's pkg/volume/util/atomic_writer.go in small.
//
// Where it departs from upstream, and why: the writer does not compare the
// new payload with the old one before writing (it always writes a fresh
// timestamped directory: simpler to read, and a rewrite of identical bytes
// is harmless to a reader); it has no Windows branch (the course runs on
// Linux).
package util

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

const (
	// dataDirName is the symlink to the current timestamped directory.
	dataDirName = "..data"
	// newDataDirName is the symlink built next to it and renamed over it.
	newDataDirName = "..data_tmp"

	maxFileNameLength = 255
	maxPathLength     = 4096
)

// FileProjection is one file of a payload: its bytes and its mode bits.
type FileProjection struct {
	Data []byte
	Mode int32
}

// AtomicWriter projects a set of files into a directory so that a reader
// sees either the whole old set or the whole new set, never a mix.
//
// The layout it keeps in the target directory:
//
//	..2026_11_26_04_05_06.123456789/   the real files of one version
//	..data -> ..2026_11_26_04_05_06.123456789
//	<name> -> ..data/<name>            one symlink per top-level name
//
// An update writes a new timestamped directory, points a fresh symlink
// (..data_tmp) at it and renames that symlink over ..data: rename(2) is
// atomic, so a reader that follows <name> -> ..data/<name> resolves ..data
// once and finds every file of one version. Names starting with ".." are
// reserved. A writer is not safe for concurrent use: one volume, one
// writer at a time (the volume manager's reconciler).
type AtomicWriter struct {
	targetDir  string
	logContext string
}

// NewAtomicWriter returns a writer for targetDir, which must exist.
// logContext ("pod ns/name volume v") prefixes the writer's log lines.
func NewAtomicWriter(targetDir, logContext string) (*AtomicWriter, error) {
	if _, err := os.Stat(targetDir); err != nil {
		return nil, err
	}
	return &AtomicWriter{targetDir: targetDir, logContext: logContext}, nil
}

// Write replaces the directory's content with payload (keys are relative
// paths, "a" or "dir/b"). Files of the previous version that are not in
// payload disappear; the previous timestamped directory is removed.
func (w *AtomicWriter) Write(payload map[string]FileProjection) error {
	clean, err := validatePayload(payload)
	if err != nil {
		klog.ErrorS(err, "Invalid payload", "context", w.logContext)
		return err
	}

	// Which version is current, and which of its names will vanish.
	dataDir := filepath.Join(w.targetDir, dataDirName)
	oldTsName, err := os.Readlink(dataDir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("%s: reading the data directory link: %w", w.logContext, err)
	}
	var vanished []string
	if oldTsName != "" {
		vanished, err = w.topLevelNamesToRemove(clean, filepath.Join(w.targetDir, oldTsName))
		if err != nil {
			return fmt.Errorf("%s: listing the current files: %w", w.logContext, err)
		}
	}

	// A new timestamped directory holding the whole new version.
	tsDir, err := os.MkdirTemp(w.targetDir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return fmt.Errorf("%s: creating a timestamped directory: %w", w.logContext, err)
	}
	// 0755 whatever the umask: other users (the container's) must traverse it.
	if err := os.Chmod(tsDir, 0o755); err != nil {
		os.RemoveAll(tsDir)
		return fmt.Errorf("%s: %w", w.logContext, err)
	}
	if err := writePayloadToDir(clean, tsDir); err != nil {
		os.RemoveAll(tsDir)
		return fmt.Errorf("%s: writing the payload: %w", w.logContext, err)
	}

	// The user-visible symlinks point through ..data, so they are created
	// once and never change: only ..data moves.
	if err := w.createUserVisibleFiles(clean); err != nil {
		os.RemoveAll(tsDir)
		return fmt.Errorf("%s: creating the visible symlinks: %w", w.logContext, err)
	}

	// The swap: a new symlink renamed over the old one.
	tmpLink := filepath.Join(w.targetDir, newDataDirName)
	os.Remove(tmpLink) // a leftover from a write that died half way; absent normally
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		os.RemoveAll(tsDir)
		return fmt.Errorf("%s: %w", w.logContext, err)
	}
	if err := os.Rename(tmpLink, dataDir); err != nil {
		os.Remove(tmpLink)
		os.RemoveAll(tsDir)
		return fmt.Errorf("%s: swapping the data directory link: %w", w.logContext, err)
	}

	// Only now may the old names and the old version go.
	var errs []error
	for _, name := range vanished {
		if err := os.Remove(filepath.Join(w.targetDir, name)); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	if oldTsName != "" && oldTsName != filepath.Base(tsDir) {
		if err := os.RemoveAll(filepath.Join(w.targetDir, oldTsName)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: removing the previous version: %v", w.logContext, errs)
	}
	return nil
}

// validatePayload refuses paths that could leave the directory or collide
// with the writer's own names, and returns the payload with cleaned keys.
func validatePayload(payload map[string]FileProjection) (map[string]FileProjection, error) {
	clean := make(map[string]FileProjection, len(payload))
	for p, f := range payload {
		if err := validatePath(p); err != nil {
			return nil, err
		}
		clean[filepath.Clean(p)] = f
	}
	return clean, nil
}

// validatePath: the messages are upstream's.
func validatePath(p string) error {
	if p == "" {
		return fmt.Errorf("invalid path: must not be empty: %q", p)
	}
	if filepath.IsAbs(p) {
		return fmt.Errorf("invalid path: must be relative path: %s", p)
	}
	if len(p) > maxPathLength {
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLength)
	}
	parts := strings.Split(p, string(os.PathSeparator))
	for _, part := range parts {
		if part == ".." {
			return fmt.Errorf("invalid path: must not contain '..': %s", p)
		}
		if len(part) > maxFileNameLength {
			return fmt.Errorf("invalid path: filenames must be less than or equal to %d characters", maxFileNameLength)
		}
	}
	if strings.HasPrefix(parts[0], "..") && len(parts[0]) > 2 {
		return fmt.Errorf("invalid path: must not start with '..': %s", p)
	}
	return nil
}

// topLevelNamesToRemove lists the names visible in the target directory
// (the first element of each path) that the old version had and the new
// one has not: their symlinks go after the swap. A name kept at the top
// whose subtree lost files needs nothing: the subtree lives under ..data.
func (w *AtomicWriter) topLevelNamesToRemove(payload map[string]FileProjection, oldTsDir string) ([]string, error) {
	entries, err := os.ReadDir(oldTsDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for p := range payload {
		keep[topLevel(p)] = true
	}
	var out []string
	for _, e := range entries {
		if !keep[e.Name()] {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func topLevel(p string) string {
	first, _, _ := strings.Cut(p, string(os.PathSeparator))
	return first
}

// writePayloadToDir writes each file with its mode, chmod'ed afterwards so
// the umask does not matter.
func writePayloadToDir(payload map[string]FileProjection, dir string) error {
	for p, f := range payload {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(f.Mode) & os.ModePerm
		if err := os.WriteFile(full, f.Data, mode); err != nil {
			return err
		}
		if err := os.Chmod(full, mode); err != nil {
			return err
		}
	}
	return nil
}

// createUserVisibleFiles makes <name> -> ..data/<name> for every top-level
// name that has no symlink yet.
func (w *AtomicWriter) createUserVisibleFiles(payload map[string]FileProjection) error {
	for p := range payload {
		name := topLevel(p)
		visible := filepath.Join(w.targetDir, name)
		if _, err := os.Lstat(visible); err == nil {
			continue
		} else if !os.IsNotExist(err) {
			return err
		}
		if err := os.Symlink(filepath.Join(dataDirName, name), visible); err != nil {
			return err
		}
	}
	return nil
}
