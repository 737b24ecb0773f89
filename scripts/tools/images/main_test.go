package main

import (
	"archive/tar"
	"crypto/tls"
	"crypto/x509"
	"debug/elf"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// staticELF is a static program of this machine's (busybox-static's), to
// stand for agnhost and nnp; the test is skipped without one.
func staticELF(t *testing.T) string {
	const bin = "/bin/busybox"
	if _, err := readStatic(bin); err != nil {
		t.Skipf("no static busybox here (apt-get install busybox-static): %v", err)
	}
	return bin
}

// TestReadStaticRefusesADynamicProgram: a dynamically linked agnhost in an
// image fails every spec with "exec /agnhost: no such file or directory";
// the builder refuses it first.
func TestReadStaticRefusesADynamicProgram(t *testing.T) {
	const bin = "/bin/ls"
	f, err := elf.Open(bin)
	if err != nil {
		t.Skipf("%s: %v", bin, err)
	}
	dynamic := false
	for _, p := range f.Progs {
		dynamic = dynamic || p.Type == elf.PT_INTERP
	}
	f.Close()
	if !dynamic {
		t.Skipf("%s is static here", bin)
	}
	if _, err := readStatic(bin); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("readStatic(%s) = %v, want an error that says to build it with CGO_ENABLED=0", bin, err)
	}
}

// TestE2EImages: the names and tags are manifest.go's, agnhost runs
// /agnhost pause with busybox's applets beside it and the image's own user,
// nonroot runs as 1234 and nnp is setuid root.
func TestE2EImages(t *testing.T) {
	bin := staticELF(t)
	bb := &busybox{data: []byte("busybox"), version: "1.37.0", banner: "BusyBox v1.37.0", applets: []string{"bin/sh", "bin/id", "usr/bin/wget", "sbin/sysctl"}}
	pause, err := newImage(mustLayer(t, []entry{{name: "pause", mode: 0o755, data: []byte("p")}}), v1.Config{Entrypoint: []string{"/pause"}})
	if err != nil {
		t.Fatal(err)
	}
	images, err := e2eImages(bb, pause, e2eBins{agnhost: bin, nonewprivs: bin, curl: bin})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]v1.Image{}
	for _, im := range images {
		byName[im.name] = im.img
	}
	for _, n := range []string{
		"registry.k8s.io/e2e-test-images/agnhost:2.66.1", "registry.k8s.io/e2e-test-images/busybox:1.37.0-2",
		"registry.k8s.io/e2e-test-images/nonroot:1.5", "registry.k8s.io/e2e-test-images/nonewprivs:1.4",
		"registry.k8s.io/pause:3.10.2", "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1",
	} {
		if byName[n] == nil {
			t.Errorf("no image %s among %d", n, len(images))
		}
	}
	if len(byName) != len(images) {
		t.Errorf("%d images under %d names", len(images), len(byName))
	}

	agn := byName["registry.k8s.io/e2e-test-images/agnhost:2.66.1"]
	cfg := configOf(t, agn)
	if strings.Join(cfg.Entrypoint, " ") != "/agnhost" || strings.Join(cfg.Cmd, " ") != "pause" {
		t.Errorf("agnhost runs %q %q, want /agnhost pause", cfg.Entrypoint, cfg.Cmd)
	}
	files := filesOf(t, agn)
	want, _ := os.ReadFile(bin)
	if h := files["agnhost"]; h == nil || h.Size != int64(len(want)) || h.Mode != 0o755 {
		t.Errorf("agnhost's /agnhost: %+v, want %d bytes, mode 0755", h, len(want))
	}
	if h := files["agnhost-2"]; h == nil || h.Linkname != "agnhost" {
		t.Errorf("agnhost's /agnhost-2: %+v, want a link to agnhost", h)
	}
	if h := files["bin/sh"]; h == nil || h.Linkname != "/bin/busybox" {
		t.Errorf("agnhost's /bin/sh: %+v, want busybox's applet", h)
	}
	if h := files["bin/bash"]; h == nil || h.Mode != 0o755 || !strings.Contains(string(contentOf(t, agn, "bin/bash")), "exec /bin/sh \"$@\"") {
		t.Errorf("agnhost's /bin/bash: %+v, want a script that runs sh (the specs run scripts with bash)", h)
	}
	if h := files["usr/bin/curl"]; h == nil || h.Size != int64(len(want)) || h.Mode != 0o755 {
		t.Errorf("agnhost's /usr/bin/curl: %+v, want the -curl program, mode 0755 (the exec hooks run curl)", h)
	}
	// The HTTPS hooks' sidecar serves with /localhost.crt and .key: a pair
	// that crypto/tls accepts, for localhost.
	pair, err := tls.X509KeyPair(contentOf(t, agn, "localhost.crt"), contentOf(t, agn, "localhost.key"))
	if err != nil {
		t.Errorf("agnhost's /localhost.crt and /localhost.key: %v", err)
	} else if c, err := x509.ParseCertificate(pair.Certificate[0]); err != nil || c.VerifyHostname("localhost") != nil {
		t.Errorf("agnhost's /localhost.crt is not for localhost: %v", err)
	}
	if !strings.Contains(string(contentOf(t, agn, "etc/passwd")), "user-defined-in-image:x:1000:") ||
		!strings.Contains(string(contentOf(t, agn, "etc/group")), "group-defined-in-image:x:50000:user-defined-in-image") {
		t.Errorf("agnhost's /etc/passwd or /etc/group lack the image's own user and group")
	}

	// The specs run /bin/sysctl; Debian's busybox lists it in /sbin.
	e2eBusybox := filesOf(t, byName["registry.k8s.io/e2e-test-images/busybox:1.37.0-2"])
	for _, n := range []string{"bin/sysctl", "sbin/sysctl", "bin/wget", "usr/bin/wget", "bin/sh"} {
		if h := e2eBusybox[n]; h == nil || h.Linkname != "/bin/busybox" {
			t.Errorf("the e2e busybox's /%s: %+v, want busybox's applet", n, h)
		}
	}

	if u := configOf(t, byName["registry.k8s.io/e2e-test-images/nonroot:1.5"]).User; u != "1234" {
		t.Errorf("nonroot runs as %q, want 1234", u)
	}
	if h := filesOf(t, byName["registry.k8s.io/e2e-test-images/nonewprivs:1.4"])["usr/local/bin/nnp"]; h == nil || h.Mode != 0o4755 || h.Uid != 0 {
		t.Errorf("nonewprivs' nnp: %+v, want setuid root (mode 04755)", h)
	}
}

// TestE2EImagesRefuseADynamicAgnhost: the error names agnhost.
func TestE2EImagesRefuseADynamicAgnhost(t *testing.T) {
	bb := &busybox{data: []byte("busybox"), version: "1.37.0"}
	_, err := e2eImages(bb, nil, e2eBins{agnhost: "/nonexistent/agnhost"})
	if err == nil || !strings.HasPrefix(err.Error(), "agnhost: ") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("e2eImages with a missing agnhost = %v, want an agnhost: error", err)
	}
}

func mustLayer(t *testing.T, e []entry) v1.Layer {
	t.Helper()
	l, err := newLayer(e)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func configOf(t *testing.T, img v1.Image) v1.Config {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf.Config
}

// filesOf is the tar headers of the image's only layer, by name.
func filesOf(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	walk(t, img, func(h *tar.Header, _ io.Reader) { out[h.Name] = h })
	return out
}

func contentOf(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	var b []byte
	walk(t, img, func(h *tar.Header, r io.Reader) {
		if h.Name == name {
			b, _ = io.ReadAll(r)
		}
	})
	return b
}

func walk(t *testing.T, img v1.Image, f func(*tar.Header, io.Reader)) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		f(h, tr)
	}
}
