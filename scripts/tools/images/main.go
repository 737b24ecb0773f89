// images builds the offline images of chapter 19 as image archives and
// imports them into containerd, for a machine without registry access:
//
//   - the sandbox image (containerd's sandbox_image, registry.k8s.io/pause:3.10
//     by default): ./pause, this repository's pause, built static;
//   - busybox, from Debian's busybox-static with every applet linked,
//     tagged with the version the binary says it is (docker.io/library/busybox:1.35.0).
//
// Their names are the registry's, so that pod specs and containerd's
// configuration read the same offline and online; their labels say whose
// build they are (org.opencontainers.image.vendor, .source, .description).
// With registry access, pull the registry's images instead.
//
//	go run . -out DIR [-address SOCK -ctr ctr -snapshotter overlayfs]
//
// scripts/containerd.sh images runs it.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	labelVendor      = "org.opencontainers.image.vendor"
	labelSource      = "org.opencontainers.image.source"
	labelDescription = "org.opencontainers.image.description"
	labelVersion     = "org.opencontainers.image.version"
	vendor           = "mykubelet (built offline by scripts/tools/images, not the registry's image)"
)

func main() {
	out := flag.String("out", "", "directory for the image archives (required)")
	address := flag.String("address", "", "containerd's socket to import the archives into (none: only build them)")
	ctr := flag.String("ctr", "ctr", "the ctr binary that imports them")
	snapshotter := flag.String("snapshotter", "", "the snapshotter to unpack them for (containerd's CRI snapshotter; empty: ctr's default)")
	pauseName := flag.String("pause-image", "registry.k8s.io/pause:3.10", "the sandbox image's name (containerd's sandbox_image)")
	busyboxBin := flag.String("busybox", "/bin/busybox", "a static busybox (Debian: apt-get install busybox-static)")
	flag.Parse()
	if err := run(*out, *address, *ctr, *snapshotter, *pauseName, *busyboxBin); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

func run(out, address, ctr, snapshotter, pauseName, busyboxBin string) error {
	if out == "" {
		return errors.New("-out is required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	pause, err := pauseImage(out)
	if err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	busybox, version, err := busyboxImage(busyboxBin)
	if err != nil {
		return fmt.Errorf("busybox: %w", err)
	}
	images := []struct {
		name string
		img  v1.Image
	}{
		{pauseName, pause},
		{"docker.io/library/busybox:" + version, busybox},
	}
	for _, im := range images {
		ref, err := name.NewTag(im.name)
		if err != nil {
			return fmt.Errorf("image name %q: %w", im.name, err)
		}
		file := filepath.Join(out, path.Base(ref.RepositoryStr())+"_"+ref.TagStr()+".tar")
		if err := tarball.WriteToFile(file, ref, im.img); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
		fmt.Printf("built    %s (%s)\n", im.name, file)
		if address == "" {
			continue
		}
		args := []string{"--address", address, "-n", "k8s.io", "images", "import"}
		if snapshotter != "" {
			args = append(args, "--snapshotter", snapshotter)
		}
		cmd := exec.Command(ctr, append(args, file)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", ctr, strings.Join(cmd.Args[1:], " "), err, bytes.TrimSpace(b))
		}
		fmt.Printf("imported %s into containerd (%s, namespace k8s.io)\n", im.name, address)
	}
	return nil
}

// pauseImage builds ./pause static and puts it in an image alone, running
// as upstream's does (user 65535).
func pauseImage(tmp string) (v1.Image, error) {
	bin := filepath.Join(tmp, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./pause: %w: %s", err, bytes.TrimSpace(b))
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	os.Remove(bin)
	layer, err := newLayer([]entry{{name: "pause", mode: 0o755, data: data}})
	if err != nil {
		return nil, err
	}
	return newImage(layer, v1.Config{
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
		Labels: map[string]string{
			labelVendor:      vendor,
			labelSource:      "scripts/tools/images/pause (a Go program in the mykubelet repository)",
			labelDescription: "The pod sandbox's process: sleeps, reaps zombies, exits on SIGINT/SIGTERM, like upstream's pause.c; named as containerd's sandbox_image",
		},
	})
}

var busyboxVersion = regexp.MustCompile(`^BusyBox v(\d+\.\d+\.\d+)`)

// busyboxImage puts a static busybox at /bin/busybox with every applet it
// lists (busybox --list-full) as a symlink to it, a root and a nobody
// user, and /tmp. It returns the version the binary reports.
func busyboxImage(bin string) (v1.Image, string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, "", fmt.Errorf("%w (Debian: apt-get install busybox-static)", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			f.Close()
			return nil, "", fmt.Errorf("%s is linked dynamically; an image needs a static one (Debian: apt-get install busybox-static)", bin)
		}
	}
	f.Close()
	help, _ := exec.Command(bin, "--help").Output() // it exits non-zero; its first line is what matters
	first, _, _ := strings.Cut(string(help), "\n")
	m := busyboxVersion.FindStringSubmatch(first)
	if m == nil {
		return nil, "", fmt.Errorf("%s --help says %q, not \"BusyBox vX.Y.Z …\"", bin, first)
	}
	list, err := exec.Command(bin, "--list-full").Output()
	if err != nil {
		return nil, "", fmt.Errorf("%s --list-full: %w", bin, err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, "", err
	}
	entries := []entry{
		{name: "bin/", mode: 0o755}, {name: "sbin/", mode: 0o755}, {name: "usr/", mode: 0o755},
		{name: "usr/bin/", mode: 0o755}, {name: "usr/sbin/", mode: 0o755},
		{name: "etc/", mode: 0o755}, {name: "root/", mode: 0o700}, {name: "home/", mode: 0o755},
		{name: "var/", mode: 0o755}, {name: "var/www/", mode: 0o755},
		{name: "tmp/", mode: 0o1777},
		{name: "bin/busybox", mode: 0o755, data: data},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\n")},
	}
	applets := strings.Fields(string(list))
	sort.Strings(applets)
	for _, a := range applets {
		if a == "bin/busybox" || strings.Contains(a, "..") {
			continue
		}
		entries = append(entries, entry{name: a, link: "/bin/busybox"})
	}
	layer, err := newLayer(entries)
	if err != nil {
		return nil, "", err
	}
	source := "Debian's busybox-static, " + strings.TrimSpace(first)
	img, err := newImage(layer, v1.Config{
		Cmd: []string{"sh"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: map[string]string{
			labelVendor:      vendor,
			labelSource:      source,
			labelVersion:     m[1],
			labelDescription: fmt.Sprintf("busybox %s with its %d applets linked, from this machine's %s", m[1], len(applets), bin),
		},
	})
	return img, m[1], err
}

type entry struct {
	name string // relative; a trailing slash makes a directory
	mode int64
	data []byte
	link string // a symlink's target
}

// newLayer writes entries as an uncompressed tar, owned by root, with no
// time stamps, so that the same input gives the same layer.
func newLayer(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, e := range entries {
		if strings.HasSuffix(e.name, "/") {
			dirs[e.name] = true
		}
	}
	for _, e := range entries {
		// A parent directory the list did not name (usr/sbin/…): made once.
		for d := filepath.Dir(strings.TrimSuffix(e.name, "/")); d != "."; d = filepath.Dir(d) {
			if !dirs[d+"/"] {
				dirs[d+"/"] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
					return nil, err
				}
			}
		}
		h := &tar.Header{Name: e.name, Mode: e.mode, Format: tar.FormatPAX}
		switch {
		case e.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.link, 0o777
		case strings.HasSuffix(e.name, "/"):
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

func newImage(layer v1.Layer, cfg v1.Config) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Config = runtime.GOARCH, "linux", cfg
	return mutate.ConfigFile(img, cf)
}
