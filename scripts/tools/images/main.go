// images builds the offline images of chapter 19 as image archives and
// imports them into containerd, for a machine without registry access:
//
//   - the sandbox image (containerd's sandbox_image, registry.k8s.io/pause:3.10
//     by default): ./pause, this repository's pause, built static;
//   - busybox, from Debian's busybox-static with every applet linked,
//     tagged with the version the binary says it is (docker.io/library/busybox:1.35.0);
//   - with -agnhost (and -nonewprivs), the images of upstream's e2e specs
//     that build offline (scripts/conformance.sh): agnhost (a static agnhost
//     with busybox's applets beside it, as upstream's on Alpine), the e2e
//     busybox, nonroot (busybox as user 1234), nonewprivs (a setuid nnp) and
//     the e2e pause, under the names and tags of
//     k8s.io/kubernetes/test/utils/image/manifest.go.
//
// Their names are the registry's, so that pod specs and containerd's
// configuration read the same offline and online; their labels say whose
// build they are (org.opencontainers.image.vendor, .source, .description).
// With registry access, pull the registry's images instead.
//
//	go run . -out DIR [-address SOCK -ctr ctr -snapshotter overlayfs] [-agnhost FILE -nonewprivs FILE]
//
// scripts/containerd.sh images runs it.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/elf"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

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
	agnhost := flag.String("agnhost", "", "a static agnhost (CGO_ENABLED=0 go build k8s.io/kubernetes/test/images/agnhost): build the e2e images too")
	nnp := flag.String("nonewprivs", "", "a static nnp (k8s.io/kubernetes/test/images/nonewprivs) for the e2e nonewprivs image (needs -agnhost)")
	curl := flag.String("curl", "", "a static curl (go build ./curl, the options the e2e specs use) for the agnhost image (needs -agnhost)")
	flag.Parse()
	if (*nnp != "" || *curl != "") && *agnhost == "" {
		fmt.Fprintln(os.Stderr, "images: -nonewprivs and -curl need -agnhost (they are for the e2e images)")
		os.Exit(2)
	}
	if err := run(*out, *address, *ctr, *snapshotter, *pauseName, *busyboxBin, e2eBins{*agnhost, *nnp, *curl}); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

// e2eBins are the static programs of the e2e images; agnhost empty: none.
type e2eBins struct{ agnhost, nonewprivs, curl string }

type namedImage struct {
	name string
	img  v1.Image
}

func run(out, address, ctr, snapshotter, pauseName, busyboxBin string, e2e e2eBins) error {
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
	bb, err := readBusybox(busyboxBin)
	if err != nil {
		return fmt.Errorf("busybox: %w", err)
	}
	busybox, err := bb.image()
	if err != nil {
		return fmt.Errorf("busybox: %w", err)
	}
	images := []namedImage{
		{pauseName, pause},
		{"docker.io/library/busybox:" + bb.version, busybox},
	}
	if e2e.agnhost != "" {
		more, err := e2eImages(bb, pause, e2e)
		if err != nil {
			return err
		}
		images = append(images, more...)
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

// busybox is a static busybox read from this machine: its file, its version
// and the applets it lists (busybox --list-full).
type busybox struct {
	data    []byte
	version string
	banner  string // its --help's first line
	applets []string
}

// readBusybox checks that bin is a static busybox and reads it.
func readBusybox(bin string) (*busybox, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("%w (Debian: apt-get install busybox-static)", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			f.Close()
			return nil, fmt.Errorf("%s is linked dynamically; an image needs a static one (Debian: apt-get install busybox-static)", bin)
		}
	}
	f.Close()
	help, _ := exec.Command(bin, "--help").Output() // it exits non-zero; its first line is what matters
	first, _, _ := strings.Cut(string(help), "\n")
	m := busyboxVersion.FindStringSubmatch(first)
	if m == nil {
		return nil, fmt.Errorf("%s --help says %q, not \"BusyBox vX.Y.Z …\"", bin, first)
	}
	list, err := exec.Command(bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", bin, err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	applets := strings.Fields(string(list))
	sort.Strings(applets)
	return &busybox{data: data, version: m[1], banner: strings.TrimSpace(first), applets: applets}, nil
}

// entries are busybox at /bin/busybox with every applet as a symlink to
// it, the usual directories, /tmp, and /etc/passwd and /etc/group with
// root, nobody and the extra lines given.
func (b *busybox) entries(passwd, group string) []entry {
	entries := []entry{
		{name: "bin/", mode: 0o755}, {name: "sbin/", mode: 0o755}, {name: "usr/", mode: 0o755},
		{name: "usr/bin/", mode: 0o755}, {name: "usr/sbin/", mode: 0o755},
		{name: "etc/", mode: 0o755}, {name: "root/", mode: 0o700}, {name: "home/", mode: 0o755},
		{name: "var/", mode: 0o755}, {name: "var/www/", mode: 0o755},
		{name: "tmp/", mode: 0o1777},
		{name: "bin/busybox", mode: 0o755, data: b.data},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n" + passwd)},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\n" + group)},
	}
	for _, a := range b.applets {
		if a == "bin/busybox" || strings.Contains(a, "..") {
			continue
		}
		entries = append(entries, entry{name: a, link: "/bin/busybox"})
	}
	return entries
}

// image is busybox alone, running sh.
func (b *busybox) image() (v1.Image, error) {
	layer, err := newLayer(b.entries("", ""))
	if err != nil {
		return nil, err
	}
	return newImage(layer, v1.Config{
		Cmd: []string{"sh"},
		Env: []string{pathEnv},
		Labels: map[string]string{
			labelVendor:      vendor,
			labelSource:      "Debian's busybox-static, " + b.banner,
			labelVersion:     b.version,
			labelDescription: fmt.Sprintf("busybox %s with its %d applets linked, from this machine's busybox", b.version, len(b.applets)),
		},
	})
}

const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// The e2e images' names, as k8s.io/kubernetes v1.37.1's
// test/utils/image/manifest.go has them.
const (
	e2eRegistry = "registry.k8s.io/e2e-test-images/"
	e2eAgnhost  = e2eRegistry + "agnhost:2.66.1"
	e2eBusybox  = e2eRegistry + "busybox:1.37.0-2"
	e2eNonRoot  = e2eRegistry + "nonroot:1.5"
	e2eNNP      = e2eRegistry + "nonewprivs:1.4"
	e2ePause    = "registry.k8s.io/pause:3.10.2"
	// glibc-dns-testing is a glibc image with sh and hostname, for
	// `hostname -f`; Debian's busybox-static is glibc, linked statically,
	// and answers it from /etc/hosts as the image does.
	e2eGlibcDNS = e2eRegistry + "glibc-dns-testing:2.1.1"
)

// e2eImages are the e2e specs' images that build from what is here.
// agnhost is upstream's layout on busybox instead of Alpine: /agnhost (its
// entrypoint, "pause" by default), the link /agnhost-2, /uploads, /bin/bash
// (busybox's ash under bash's name), /usr/bin/curl (ours, with -curl), a
// certificate and key for localhost (/localhost.crt, /localhost.key), and the
// image's own user and group (user-defined-in-image 1000, a member of
// group-defined-in-image 50000).
func e2eImages(bb *busybox, pause v1.Image, bins e2eBins) ([]namedImage, error) {
	agn, err := readStatic(bins.agnhost)
	if err != nil {
		return nil, fmt.Errorf("agnhost: %w", err)
	}
	entries := bb.entries("user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n",
		"user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n")
	if bins.curl != "" {
		// Upstream's image has Alpine's curl, which the lifecycle hooks'
		// exec handlers and the network specs run; busybox has none.
		c, err := readStatic(bins.curl)
		if err != nil {
			return nil, fmt.Errorf("curl: %w", err)
		}
		entries = append(entries, entry{name: "usr/bin/curl", mode: 0o755, data: c})
	}
	// netexec --tls-cert-file /localhost.crt --tls-private-key-file
	// /localhost.key: the HTTPS hooks' sidecar (upstream's image has
	// porter's pair; this one is made at each build, for localhost).
	crt, key, err := localhostPair()
	if err != nil {
		return nil, err
	}
	entries = append(entries,
		entry{name: "localhost.crt", mode: 0o644, data: crt},
		entry{name: "localhost.key", mode: 0o644, data: key},
		// Upstream's agnhost (Alpine) has bash, which specs run scripts
		// with; busybox has none: its ash runs them, under bash's name.
		entry{name: "bin/bash", mode: 0o755, data: []byte("#!/bin/sh\n# bash is busybox's ash in this image\nexec /bin/sh \"$@\"\n")},
		entry{name: "agnhost", mode: 0o755, data: agn},
		entry{name: "agnhost-2", link: "agnhost"},
		entry{name: "uploads/", mode: 0o755},
		entry{name: "home/user-defined-in-image/", mode: 0o755})
	layer, err := newLayer(entries)
	if err != nil {
		return nil, err
	}
	agnhost, err := newImage(layer, v1.Config{
		Entrypoint: []string{"/agnhost"},
		Cmd:        []string{"pause"},
		Env:        []string{pathEnv},
		Labels: map[string]string{
			labelVendor:      vendor,
			labelSource:      "k8s.io/kubernetes/test/images/agnhost (built static) and " + bb.banner,
			labelDescription: "upstream's e2e agnhost on busybox's applets instead of Alpine",
		},
	})
	if err != nil {
		return nil, err
	}
	busybox, err := bb.e2eImage()
	if err != nil {
		return nil, err
	}
	nonroot, err := mutate.Config(busybox, v1.Config{Cmd: []string{"sh"}, Env: []string{pathEnv}, User: "1234"})
	if err != nil {
		return nil, err
	}
	images := []namedImage{{e2eAgnhost, agnhost}, {e2eBusybox, busybox}, {e2eGlibcDNS, busybox}, {e2eNonRoot, nonroot}, {e2ePause, pause}}
	if bins.nonewprivs != "" {
		nnp, err := readStatic(bins.nonewprivs)
		if err != nil {
			return nil, fmt.Errorf("nonewprivs: %w", err)
		}
		// Setuid root, as upstream's Dockerfile makes it (chmod +s).
		layer, err := newLayer(append(bb.entries("", ""), entry{name: "usr/local/bin/nnp", mode: 0o4755, data: nnp}))
		if err != nil {
			return nil, err
		}
		img, err := newImage(layer, v1.Config{Cmd: []string{"nnp"}, Env: []string{pathEnv}, Labels: map[string]string{
			labelVendor: vendor, labelSource: "k8s.io/kubernetes/test/images/nonewprivs (built static) and " + bb.banner,
		}})
		if err != nil {
			return nil, err
		}
		images = append(images, namedImage{e2eNNP, img})
	}
	return images, nil
}

// e2eImage is busybox as the e2e busybox (the registry's busybox) lays it
// out: every applet in /bin too, where the specs call them (/bin/sysctl;
// Debian's busybox lists it in /sbin).
func (b *busybox) e2eImage() (v1.Image, error) {
	entries := b.entries("", "")
	have := map[string]bool{}
	for _, e := range entries {
		have[e.name] = true
	}
	for _, a := range b.applets {
		if name := "bin/" + path.Base(a); !have[name] && !strings.Contains(a, "..") {
			have[name] = true
			entries = append(entries, entry{name: name, link: "/bin/busybox"})
		}
	}
	layer, err := newLayer(entries)
	if err != nil {
		return nil, err
	}
	return newImage(layer, v1.Config{
		Cmd: []string{"sh"},
		Env: []string{pathEnv},
		Labels: map[string]string{
			labelVendor:      vendor,
			labelSource:      "Debian's busybox-static, " + b.banner,
			labelVersion:     b.version,
			labelDescription: fmt.Sprintf("the e2e busybox: busybox %s with its %d applets linked in /bin and where it lists them", b.version, len(b.applets)),
		},
	})
}

// readStatic reads a program for an image that has nothing else it could
// load: a dynamically linked one fails in the container with "exec
// /agnhost: no such file or directory" (its loader is missing).
func readStatic(bin string) ([]byte, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is linked dynamically; build it with CGO_ENABLED=0", bin)
		}
	}
	return os.ReadFile(bin)
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

// localhostPair is a self-signed certificate for localhost and its key, in
// PEM: what netexec serves HTTPS with in the lifecycle hooks' specs (the
// kubelet checks no certificate of a hook's or a probe's).
func localhostPair() (crt, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, nil, fmt.Errorf("localhost certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, fmt.Errorf("localhost key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}
