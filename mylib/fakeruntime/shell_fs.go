package fakeruntime

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"mvdan.cc/sh/v3/interp"
)

// The interpreter's file system: every name a script opens, lists, stats
// or tests is looked up in the container's root through an os.Root.

// cause is the reason of a file error without the path, which would show
// the root-relative name.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// rel turns a path as the script sees it (absolute, or relative to dir)
// into a name inside the container's root. ".." stops at the root, as it
// does at a real "/"; symlinks are checked by os.Root.
func (p *proc) rel(dir, name string) string {
	if !path.IsAbs(name) {
		name = path.Join(dir, name)
	}
	r := strings.TrimPrefix(path.Clean(name), "/")
	if r == "" {
		return "."
	}
	return r
}

func (p *proc) dir(ctx context.Context) string {
	defer func() { _ = recover() }() // a context without a HandlerContext: the root
	return interp.HandlerCtx(ctx).Dir
}

func (p *proc) open(ctx context.Context, name string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	if name == "/dev/null" {
		return devNull{}, nil
	}
	if src, ok := strings.CutPrefix(name, sourceMarker); ok {
		return p.openSource(ctx, src)
	}
	f, err := p.root.OpenFile(p.rel(p.dir(ctx), name), flag, perm)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: cause(err)}
	}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		return meteredFile{f, p}, nil
	}
	return f, nil
}

func (p *proc) readDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	d, err := p.root.Open(p.rel(p.dir(ctx), name))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

func (p *proc) stat(ctx context.Context, name string, followSymlinks bool) (fs.FileInfo, error) {
	if followSymlinks {
		return p.root.Stat(p.rel(p.dir(ctx), name))
	}
	return p.root.Lstat(p.rel(p.dir(ctx), name))
}

// access allows what exists, and execution only of directories (to cd):
// there are no programs to execute.
func (p *proc) access(ctx context.Context, name string, mode interp.AccessMode) error {
	fi, err := p.root.Stat(p.rel(p.dir(ctx), name))
	if err != nil {
		return err
	}
	if mode&interp.AccessExec != 0 && !fi.IsDir() {
		return fs.ErrPermission
	}
	return nil
}

// devNull is /dev/null, the one device a container gets.
type devNull struct{}

func (devNull) Read([]byte) (int, error)    { return 0, io.EOF }
func (devNull) Write(b []byte) (int, error) { return len(b), nil }
func (devNull) Close() error                { return nil }
