package sandboxproc

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"mvdan.cc/sh/v3/interp"
)

// The interpreter calls the handlers below on goroutines of its own too (a
// pipeline's commands, a background job), where nothing recovers a panic:
// one would end the whole process, and with it every container it runs.
// So each handler turns a panic of its own into an internal error: a call
// or a command ends its script (exit code 2, one line on stderr, never a
// stack trace), as proc.run's recover does on the script's own goroutine;
// a file operation fails as the operation.

// ExitCodeInternalError is a command's exit code when the runtime's own
// code failed under it, as a shell's for a misused builtin.
const ExitCodeInternalError = 2

// internalError is what a handler that panicked returns: to the
// interpreter, a fatal error that ends the script.
type internalError struct{ v any }

// Error is the panic's first line.
func (e internalError) Error() string {
	msg, _, _ := strings.Cut(fmt.Sprint(e.v), "\n")
	return "internal error: " + msg
}

// guardCall wraps a CallHandler.
func guardCall(h func(context.Context, []string) ([]string, error)) func(context.Context, []string) ([]string, error) {
	return func(ctx context.Context, args []string) (out []string, err error) {
		defer func() {
			if v := recover(); v != nil {
				out, err = nil, internalError{v}
			}
		}()
		return h(ctx, args)
	}
}

// guardExec wraps an exec handler.
func guardExec(h func(context.Context, []string) error) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = internalError{v}
			}
		}()
		return h(ctx, args)
	}
}

// guardOpen wraps an open handler.
func guardOpen(h func(context.Context, string, int, os.FileMode) (io.ReadWriteCloser, error)) func(context.Context, string, int, os.FileMode) (io.ReadWriteCloser, error) {
	return func(ctx context.Context, name string, flag int, perm os.FileMode) (f io.ReadWriteCloser, err error) {
		defer func() {
			if v := recover(); v != nil {
				f, err = nil, &fs.PathError{Op: "open", Path: name, Err: internalError{v}}
			}
		}()
		return h(ctx, name, flag, perm)
	}
}

// guardStat wraps a stat handler.
func guardStat(h func(context.Context, string, bool) (fs.FileInfo, error)) func(context.Context, string, bool) (fs.FileInfo, error) {
	return func(ctx context.Context, name string, follow bool) (fi fs.FileInfo, err error) {
		defer func() {
			if v := recover(); v != nil {
				fi, err = nil, &fs.PathError{Op: "stat", Path: name, Err: internalError{v}}
			}
		}()
		return h(ctx, name, follow)
	}
}

// guardReadDir wraps a read-dir handler.
func guardReadDir(h func(context.Context, string) ([]fs.DirEntry, error)) func(context.Context, string) ([]fs.DirEntry, error) {
	return func(ctx context.Context, name string) (es []fs.DirEntry, err error) {
		defer func() {
			if v := recover(); v != nil {
				es, err = nil, &fs.PathError{Op: "readdir", Path: name, Err: internalError{v}}
			}
		}()
		return h(ctx, name)
	}
}

// guardAccess wraps an access handler.
func guardAccess(h func(context.Context, string, interp.AccessMode) error) func(context.Context, string, interp.AccessMode) error {
	return func(ctx context.Context, name string, mode interp.AccessMode) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = &fs.PathError{Op: "access", Path: name, Err: internalError{v}}
			}
		}()
		return h(ctx, name, mode)
	}
}
