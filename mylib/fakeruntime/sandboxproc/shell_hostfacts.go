package sandboxproc

import (
	"bufio"
	"context"
	"io"
	"io/fs"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
)

// The interpreter answers a few things from the host's process rather than
// through its handlers. Those that a script can reach are answered from the
// container here:
//
//   - HOME, UID, EUID and GID, which it would take from the runtime's own
//     user when the container's environment does not set them: /root and 0,
//     the container's root user (containerEnv);
//   - ~user, which it would look up in the host's user database: from the
//     container's /etc/passwd, else root only; an unknown user stays
//     unexpanded (containerEnv);
//   - its temporary directory, where it would open files named sh-interp-*
//     directly on the host: a path with a NUL byte, which no open reaches
//     (containerEnv, see fifoDir);
//   - pwd -P, which it would resolve with the host's symlinks: resolved in
//     the container's root (physicalDir);
//   - . and source, which would stat every directory of PATH on the host:
//     looked up in the container's root (sourcePath);
//   - eval, source and trap actions, which it parses as bash: parsed as
//     POSIX sh, so that no bash-only syntax (process substitution, which
//     makes FIFOs on the host) ever runs.
//
// Not hidden in-process: $$ and $PPID are the runtime's own PIDs (the
// interpreter reads os.Getpid and os.Getppid with no hook; in the sandbox
// process, PID 1 of its own PID namespace, they tell nothing);
// [ -O file ] and [ -G file ] compare with the runtime's user (always the
// owner of the container's files); interp.Dir stats "/" on the host once.

// fifoDir is the interpreter's temporary directory: absolute, so that it
// takes it, and with a NUL byte, so that a path of a script's that equals
// it (only a path made at run time can hold a NUL) fails in the os package
// before any system call.
const fifoDir = "/\x00fakeruntime-no-host-tmp"

// containerEnv is the environment the interpreter starts from: the
// container's variables, with what the interpreter would otherwise ask the
// host.
type containerEnv struct {
	expand.Environ
	p *proc
	// resetting is set while the runner's first Reset reads TMPDIR for its
	// temporary directory (newRunner); the script later sees its own.
	resetting bool
}

func (e *containerEnv) Get(name string) expand.Variable {
	if name == "TMPDIR" && e.resetting {
		return expand.Variable{Set: true, Kind: expand.String, Str: fifoDir}
	}
	if vr := e.Environ.Get(name); vr.IsSet() {
		return vr
	}
	str := ""
	switch name {
	case "HOME":
		str = "/root"
	case "UID", "EUID", "GID":
		str = "0"
	default:
		user, ok := strings.CutPrefix(name, "HOME ") // ~user
		if !ok {
			return expand.Variable{}
		}
		// An unknown user is answered "~user", which is what leaving it
		// unexpanded gives (the interpreter would ask the host otherwise).
		str = e.p.homeOf(user)
	}
	return expand.Variable{Set: true, Kind: expand.String, Str: str}
}

// homeOf is user's home directory as the container's /etc/passwd says, or
// "~user" if it does not know the user.
func (p *proc) homeOf(user string) string {
	if f, err := p.fs.Open("etc/passwd"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			if len(fields) >= 6 && fields[0] == user {
				return fields[5]
			}
		}
		return "~" + user
	}
	if user == "root" {
		return "/root"
	}
	return "~" + user
}

// maxSymlinks is how many symbolic links physicalDir follows, as Linux's
// MAXSYMLINKS.
const maxSymlinks = 40

// physicalDir is dir with its symbolic links resolved inside the container,
// as pwd -P prints it; dir itself if it cannot be resolved.
func (p *proc) physicalDir(dir string) string {
	parts := strings.Split(strings.TrimPrefix(path.Clean(dir), "/"), "/")
	cur, links := "/", 0
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		next := path.Join(cur, part)
		fi, err := p.fs.Lstat(p.rel("/", next))
		if err != nil {
			return dir
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxSymlinks {
			return dir
		}
		target, err := p.fs.Readlink(p.rel("/", next))
		if err != nil {
			return dir
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		parts = append(strings.Split(target, "/"), parts...)
	}
	return cur
}

// sourceMarker starts the path call hands to . and source once it found
// the file in the container: with a NUL byte, the interpreter's own
// lookup fails before a system call and hands the path to the open
// handler, which knows it by this prefix.
const sourceMarker = "\x00source:"

// sourcePath finds the file that `. name` reads, in the container: a name
// with a slash is a path; another is looked up in the directories of PATH
// (in the container's root), then in the current directory.
func (p *proc) sourcePath(hc interp.HandlerContext, name string) string {
	if strings.Contains(name, "/") {
		return p.abs(hc.Dir, name)
	}
	for _, dir := range strings.Split(hc.Env.Get("PATH").String(), ":") {
		if dir == "" {
			dir = "."
		}
		candidate := p.abs(hc.Dir, path.Join(dir, name))
		if fi, err := p.fs.Stat(p.rel("/", candidate)); err == nil && fi.Mode().IsRegular() {
			return candidate
		}
	}
	return p.abs(hc.Dir, name)
}

// abs is name as an absolute path in the container.
func (p *proc) abs(dir, name string) string {
	if path.IsAbs(name) {
		return path.Clean(name)
	}
	return path.Join(dir, name)
}

// openSource opens a file for . or source: the script, parsed as POSIX
// sh and rewritten as every script is (parseScript).
func (p *proc) openSource(ctx context.Context, name string) (io.ReadWriteCloser, error) {
	file, err := p.fs.Open(p.rel("/", name))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: Cause(err)}
	}
	defer file.Close()
	// One byte more than a script may have, for parseScript to refuse: a
	// file of gigabytes is not read whole to learn that it is too long.
	b, err := io.ReadAll(io.LimitReader(file, MaxScriptBytes+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: Cause(err)}
	}
	f, err := ParseScript(string(b))
	if err != nil {
		return nil, &fs.PathError{Op: "parse", Path: name, Err: err}
	}
	src, err := printScriptChecked(f)
	if err != nil {
		return nil, &fs.PathError{Op: "parse", Path: name, Err: err}
	}
	p.defs.defineFunctions(f)
	return readOnly{strings.NewReader(src)}, nil
}

// readOnly is a script read from memory.
type readOnly struct{ io.Reader }

func (readOnly) Write([]byte) (int, error) { return 0, fs.ErrPermission }
func (readOnly) Close() error              { return nil }
