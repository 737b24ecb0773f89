package sandboxproc

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// tar, the utility `kubectl cp` runs in a container (Go's archive/tar):
//
//	tar cf - [-C DIR] PATH…      kubectl cp POD:PATH LOCAL: the archive on stdout
//	tar xmf - [-C DIR]           kubectl cp LOCAL POD:PATH: the archive from stdin
//	tar tf -                     list; v for a long listing, z for gzip
//
// Options come bundled as the first argument ("cf", "-xmf") or alone
// ("-C", "-f -", "--no-same-owner"); the archive is always stdin or
// stdout (f -, or no f). Everything is read from and written into the
// container's own view of files (its root and mounts, os.Root each), so
// nothing an archive says reaches a host path outside it:
//
//   - a member name that starts with "/" is made relative, with GNU tar's
//     "Removing leading `/' from member names";
//   - a member name with a ".." component is skipped, with GNU tar's
//     "Member name contains '..'", and tar ends with status 2;
//   - a symbolic link whose target is absolute or climbs above the
//     directory it is made in is not made (GNU tar makes it; here it would
//     lead out of the container's files), nor written through: os.Root
//     refuses to follow a link that leaves the root. The climb is measured
//     from the mount the link is written into (a volume, a subPath), or
//     from the container's "/" in its own layer: `x -> ../../../..` in a
//     volume mounted at /m/a/b/c/d leads out of the volume, and is refused;
//     a link is never resolved across mounts or above a volume;
//   - hard links only to members already in the same root; no devices.
//
// Where it departs from GNU tar, and why: no owners (every file is the
// runtime's; --no-same-owner is what it always does) and no set-ID or
// sticky bits (the files are on the host); m sets each file's time to the
// runtime's clock; without m, the archive's.

// tarOptions is what the command line asks for.
type tarOptions struct {
	op      byte // 'c', 'x' or 't'
	file    string
	dir     string
	verbose bool
	gzip    bool
	touch   bool // m: do not restore modification times
	names   []string
}

// errTarReported ends tar with status 2, its messages already written.
var errTarReported = errors.New("tar: reported")

func parseTarArgs(args []string) (tarOptions, error) {
	var o tarOptions
	var pending []byte // options of a bundle that take the next arguments
	letters := func(s string) error {
		for i := 0; i < len(s); i++ {
			switch c := s[i]; c {
			case 'c', 'x', 't':
				if o.op != 0 && o.op != c {
					return errors.New("You may not specify more than one '-Acdtrux', '--delete' or  '--test-label' option")
				}
				o.op = c
			case 'v':
				o.verbose = true
			case 'z':
				o.gzip = true
			case 'm':
				o.touch = true
			case 'p', 'o':
				// same permissions / no same owner: what it does anyway
			case 'f', 'C':
				pending = append(pending, c)
			default:
				return fmt.Errorf("invalid option -- '%c'", c)
			}
		}
		return nil
	}
	set := func(c byte, v string) {
		if c == 'f' {
			o.file = v
		} else {
			o.dir = v
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case len(pending) > 0:
			set(pending[0], a)
			pending = pending[1:]
		case i == 0 && a != "" && !strings.HasPrefix(a, "-"):
			if err := letters(a); err != nil { // the traditional bundle: "cf"
				return o, err
			}
		case a == "--no-same-owner" || a == "--no-same-permissions" || a == "--same-permissions" || a == "--touch":
			o.touch = o.touch || a == "--touch"
		case a == "--create", a == "--extract", a == "--get", a == "--list":
			if err := letters(map[string]string{"--create": "c", "--extract": "x", "--get": "x", "--list": "t"}[a]); err != nil {
				return o, err
			}
		case a == "--gzip", a == "--verbose":
			o.gzip, o.verbose = o.gzip || a == "--gzip", o.verbose || a == "--verbose"
		case strings.HasPrefix(a, "--file=") || strings.HasPrefix(a, "--directory="):
			k, v, _ := strings.Cut(a, "=")
			set(map[string]byte{"--file": 'f', "--directory": 'C'}[k], v)
		case strings.HasPrefix(a, "--"):
			return o, fmt.Errorf("unrecognized option '%s'", a)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if err := letters(a[1:]); err != nil {
				return o, err
			}
		default:
			o.names = append(o.names, a)
		}
	}
	if len(pending) > 0 {
		return o, fmt.Errorf("option requires an argument -- '%c'", pending[0])
	}
	if o.op == 0 {
		return o, errors.New("You must specify one of the '-Acdtrux', '--delete' or '--test-label' options")
	}
	return o, nil
}

// tarRun is one run of tar: its streams, directory and failures.
type tarRun struct {
	p        *proc
	ctx      context.Context
	hc       interp.HandlerContext
	o        tarOptions
	base     string // the directory names are relative to, inside the container's root
	failed   bool
	stripped map[string]bool // the prefixes whose removal was reported
}

func (t *tarRun) warn(format string, a ...any) {
	fmt.Fprintf(t.hc.Stderr, "tar: "+format+"\n", a...)
}

func (t *tarRun) fail(format string, a ...any) {
	t.warn(format, a...)
	t.failed = true
}

// tar runs the utility (see above).
func (p *proc) tar(ctx context.Context, hc interp.HandlerContext, args []string) error {
	o, err := parseTarArgs(args)
	if err != nil {
		fmt.Fprintf(hc.Stderr, "tar: %v\nTry 'tar --help' or 'tar --usage' for more information.\n", err)
		return interp.NewExitStatus(2)
	}
	t := &tarRun{p: p, ctx: ctx, hc: hc, o: o, base: p.rel(hc.Dir, "."), stripped: map[string]bool{}}
	if o.file != "" && o.file != "-" {
		t.warn("%s: Cannot open: the mock runtime's tar reads and writes only standard input/output (-f -)", o.file)
		return interp.NewExitStatus(2)
	}
	if o.dir != "" {
		t.base = p.rel(hc.Dir, o.dir)
		fi, err := p.fs.Stat(t.base)
		if err == nil && !fi.IsDir() {
			err = syscall.ENOTDIR
		}
		if err != nil {
			t.warn("%s: Cannot open: %s", o.dir, errText(err))
			t.warn("Error is not recoverable: exiting now")
			return interp.NewExitStatus(2)
		}
	}
	switch o.op {
	case 'c':
		err = t.create()
	default:
		err = t.extractOrList()
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, errTarReported) {
			t.warn("%v", err)
		}
		return interp.NewExitStatus(2)
	}
	if t.failed {
		t.warn("Exiting with failure status due to previous errors")
		return interp.NewExitStatus(2)
	}
	return nil
}

// errText is an error as tar prints it: the system's words, capitalised
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

// memberName is the name a path gets in an archive, or a member's name
// made safe to extract: leading "/" and (for c) "../" removed, as GNU tar
// does, reported once each. ok is false for an extracted name that still
// has a ".." component.
func (t *tarRun) memberName(name string, creating bool) (string, bool) {
	for {
		switch {
		case strings.HasPrefix(name, "/"):
			t.strip("/")
			name = strings.TrimLeft(name, "/")
			continue
		case creating && (name == ".." || strings.HasPrefix(name, "../")):
			t.strip("../")
			name = strings.TrimPrefix(strings.TrimPrefix(name, ".."), "/")
			continue
		}
		break
	}
	if slices.Contains(strings.Split(name, "/"), "..") {
		return name, false
	}
	return name, true
}

func (t *tarRun) strip(prefix string) {
	if !t.stripped[prefix] {
		t.stripped[prefix] = true
		t.warn("Removing leading `%s' from member names", prefix)
	}
}

// create writes the archive of the named paths to stdout.
func (t *tarRun) create() error {
	if len(t.o.names) == 0 {
		return errors.New("Cowardly refusing to create an empty archive")
	}
	out := t.hc.Stdout
	var zw *gzip.Writer
	if t.o.gzip {
		zw = gzip.NewWriter(out)
		out = zw
	}
	tw := tar.NewWriter(out)
	for _, name := range t.o.names {
		member, _ := t.memberName(name, true)
		if member == "" {
			member = "."
		}
		if err := t.add(tw, t.p.rel("/"+t.base, name), member); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}

// add writes rel (a name in the container's root) as member, and what a
// directory holds. Only a write error of the archive ends tar.
func (t *tarRun) add(tw *tar.Writer, rel, member string) error {
	if err := t.ctx.Err(); err != nil {
		return err
	}
	fi, err := t.p.fs.Lstat(rel)
	if err != nil {
		t.fail("%s: Cannot stat: %s", member, errText(err))
		return nil
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = t.p.fs.Readlink(rel); err != nil {
			t.fail("%s: Cannot readlink: %s", member, errText(err))
			return nil
		}
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		t.fail("%s: %v; not dumped", member, err)
		return nil
	}
	hdr.Name, hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = member, "root", "root", 0, 0
	hdr.Format = tar.FormatGNU
	if fi.IsDir() && !strings.HasSuffix(hdr.Name, "/") {
		hdr.Name += "/"
	}
	if t.o.verbose {
		fmt.Fprintln(t.hc.Stderr, hdr.Name) // the archive is on stdout
	}
	var f io.ReadCloser
	if fi.Mode().IsRegular() {
		if f, _, err = t.p.fs.OpenFile(rel, os.O_RDONLY, 0); err != nil {
			t.fail("%s: Cannot open: %s", member, errText(err))
			return nil
		}
		defer f.Close()
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if f != nil {
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%s: Read error: %w", member, err)
		}
	}
	if !fi.IsDir() {
		return nil
	}
	infos, err := t.p.fs.ReadDir(rel)
	if err != nil {
		t.fail("%s: Cannot open: %s", member, errText(err))
		return nil
	}
	for _, i := range infos { // sorted by name
		child := path.Join(member, i.Name())
		if member == "." {
			child = "./" + i.Name()
		}
		if err := t.add(tw, path.Join(rel, i.Name()), child); err != nil {
			return err
		}
	}
	return nil
}

// dirAttrs are a directory's mode and time, set once everything is
// extracted (a file written into it would change its time; a read-only
// mode would stop the files), as GNU tar delays them.
type dirAttrs struct {
	rel   string
	mode  os.FileMode
	mtime time.Time
}

// extractOrList reads the archive from stdin, listing (t) or extracting
// (x) each member.
func (t *tarRun) extractOrList() error {
	in := t.hc.Stdin
	if in == nil {
		in = strings.NewReader("")
	}
	if t.o.gzip {
		zr, err := gzip.NewReader(in)
		if err != nil {
			t.warn("Child returned status 1") // as gzip -d under GNU tar
			return errors.New("Error is not recoverable: exiting now")
		}
		defer zr.Close()
		in = zr
	}
	tr := tar.NewReader(in)
	var dirs []dirAttrs
	for n := 0; ; n++ {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF && n > 0 {
			break
		}
		if err != nil {
			if n == 0 { // nothing, or not an archive
				t.warn("This does not look like a tar archive")
				t.warn("Exiting with failure status due to previous errors")
				return errTarReported
			}
			t.warn("Unexpected EOF in archive")
			t.warn("Error is not recoverable: exiting now")
			return errTarReported
		}
		name, ok := t.memberName(hdr.Name, false)
		if !ok {
			t.fail("%s: Member name contains '..'", strings.TrimLeft(hdr.Name, "/"))
			continue
		}
		name = strings.TrimSuffix(name, "/")
		if name == "" || name == "." || !t.selected(name) {
			continue
		}
		if t.o.op == 't' || t.o.verbose {
			t.list(hdr, name)
		}
		if t.o.op == 't' {
			continue
		}
		if d, ok := t.extract(tr, hdr, name); ok {
			dirs = append(dirs, d)
		}
	}
	slices.Reverse(dirs) // the deepest first
	for _, d := range dirs {
		r, n, _, err := t.p.fs.writable("chmod", d.rel)
		if err == nil {
			_ = r.Chmod(n, d.mode)
			_ = r.Chtimes(n, d.mtime, d.mtime)
		}
	}
	return nil
}

// selected is whether the member is one the command line names (all when
// it names none): the name itself or under it.
func (t *tarRun) selected(name string) bool {
	if len(t.o.names) == 0 {
		return true
	}
	for _, want := range t.o.names {
		want = strings.TrimSuffix(strings.TrimLeft(want, "/"), "/")
		if name == want || strings.HasPrefix(name, want+"/") {
			return true
		}
	}
	return false
}

// list prints a member: its name, or with v as `tar tv` does.
func (t *tarRun) list(hdr *tar.Header, name string) {
	out := t.hc.Stdout
	if !t.o.verbose || t.o.op == 'x' { // xv names each member; tv is the long listing
		if hdr.Typeflag == tar.TypeDir {
			name += "/"
		}
		fmt.Fprintln(out, name)
		return
	}
	kind := map[byte]byte{tar.TypeDir: 'd', tar.TypeSymlink: 'l', tar.TypeLink: 'h', tar.TypeChar: 'c', tar.TypeBlock: 'b', tar.TypeFifo: 'p'}[hdr.Typeflag]
	if kind == 0 {
		kind = '-'
	}
	owner := hdr.Uname + "/" + hdr.Gname
	if hdr.Uname == "" {
		owner = fmt.Sprintf("%d/%d", hdr.Uid, hdr.Gid)
	}
	line := fmt.Sprintf("%c%s %s %8d %s %s", kind, os.FileMode(hdr.Mode).Perm().String()[1:], owner, hdr.Size, hdr.ModTime.UTC().Format("2006-01-02 15:04"), name)
	if hdr.Typeflag == tar.TypeDir {
		line += "/"
	}
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		line += " -> " + hdr.Linkname
	case tar.TypeLink:
		line += " link to " + hdr.Linkname
	}
	fmt.Fprintln(out, line)
}

// extract makes one member at name (relative to the base directory); a
// directory's attributes are returned to be set at the end.
func (t *tarRun) extract(tr *tar.Reader, hdr *tar.Header, name string) (dirAttrs, bool) {
	rel := t.p.rel("/"+t.base, name)
	perm := os.FileMode(hdr.Mode).Perm() // no set-ID or sticky bits
	mtime := hdr.ModTime
	if t.o.touch {
		mtime = t.p.clock.Now()
	}
	if hdr.Typeflag != tar.TypeDir {
		if err := t.p.fs.MkdirAll(path.Dir(rel), 0o755); err != nil {
			t.fail("%s: Cannot mkdir: %s", name, errText(err))
			return dirAttrs{}, false
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := t.p.fs.MkdirAll(rel, 0o700); err != nil {
			t.fail("%s: Cannot mkdir: %s", name, errText(err))
			return dirAttrs{}, false
		}
		return dirAttrs{rel: rel, mode: perm, mtime: mtime}, true
	case tar.TypeReg:
		t.unlink(rel)
		f, inLayer, err := t.p.fs.OpenFile(rel, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_EXCL, 0o600)
		if err != nil {
			t.fail("%s: Cannot open: %s", name, errText(err))
			return dirAttrs{}, false
		}
		var w io.Writer = f
		if inLayer {
			w = meteredFile{f, t.p} // the writable layer counts against memory
		}
		_, err = io.Copy(w, tr)
		f.Close()
		if err != nil {
			t.fail("%s: Cannot write: %s", name, errText(err))
			return dirAttrs{}, false
		}
		r, n, _, _ := t.p.fs.writable("chmod", rel)
		_ = r.Chmod(n, perm)
		_ = r.Chtimes(n, mtime, mtime)
	case tar.TypeSymlink:
		// Measured from where it is made: in a mount, from the mount's
		// directory (a subPath's too), never from the container's "/".
		r, n, m, err := t.p.fs.writable("symlink", rel)
		if err == nil && leavesRoot(r, n, hdr.Linkname) {
			where := "the container's files"
			if m != nil {
				where = "its mount /" + m.Path
			}
			t.fail("%s: Cannot create symlink to '%s': it would lead out of %s", name, hdr.Linkname, where)
			return dirAttrs{}, false
		}
		if err == nil {
			t.unlink(rel)
			err = r.Symlink(hdr.Linkname, n)
		}
		if err != nil {
			t.fail("%s: Cannot create symlink to '%s': %s", name, hdr.Linkname, errText(err))
		}
	case tar.TypeLink:
		target, ok := t.memberName(hdr.Linkname, false)
		r, n, _, err := t.p.fs.writable("link", rel)
		var lr *os.Root
		var ln string
		if err == nil && ok {
			lr, ln, _, err = t.p.fs.resolve("link", t.p.rel("/"+t.base, target))
		}
		switch {
		case !ok:
			t.fail("%s: Cannot hard link to '%s': Member name contains '..'", name, hdr.Linkname)
		case err != nil:
			t.fail("%s: Cannot hard link to '%s': %s", name, hdr.Linkname, errText(err))
		case lr != r:
			t.fail("%s: Cannot hard link to '%s': Invalid cross-device link", name, hdr.Linkname)
		default:
			t.unlink(rel)
			if err := r.Link(ln, n); err != nil {
				t.fail("%s: Cannot hard link to '%s': %s", name, hdr.Linkname, errText(err))
			}
		}
	default:
		t.fail("%s: Cannot mknod: Operation not permitted", name)
	}
	return dirAttrs{}, false
}

// unlink removes what is at rel before a member replaces it (a link is
// removed, never followed), as GNU tar does; a directory stays.
func (t *tarRun) unlink(rel string) {
	if fi, err := t.p.fs.Lstat(rel); err == nil && !fi.IsDir() {
		_ = t.p.fs.Remove(rel)
	}
}

// leavesRoot is whether a symlink at rel (a name in root: the container's
// root, or a mount's directory) to target would lead out of root: an
// absolute target, or one whose ".." climb above it, resolved against
// what is already there (`d -> .` makes d/d/x's ".." climb from the top),
// as the kernel would follow it. A ".." past a name not there yet, or
// past more than 40 links, is refused: what it will climb is not known.
func leavesRoot(root *os.Root, rel, target string) bool {
	if target == "" || path.IsAbs(target) {
		return true
	}
	todo := strings.Split(target, "/")
	if d := path.Dir(rel); d != "." {
		todo = append(strings.Split(d, "/"), todo...)
	}
	type step struct {
		name  string
		known bool // there, and a directory
	}
	var at []step
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 || !at[len(at)-1].known {
				return true
			}
			at = at[:len(at)-1]
			continue
		}
		names := make([]string, 0, len(at)+1)
		for _, s := range at {
			names = append(names, s.name)
		}
		p := path.Join(append(names, c)...)
		fi, err := root.Lstat(p)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			to, err := root.Readlink(p)
			if links++; err != nil || links > 40 || path.IsAbs(to) {
				return true
			}
			todo = append(strings.Split(to, "/"), todo...)
			continue
		}
		at = append(at, step{c, err == nil && fi.IsDir()})
	}
	return false
}
