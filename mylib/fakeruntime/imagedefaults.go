package fakeruntime

import "strings"

// ImageDefault is what a container of an image runs when its config gives
// no command and no args: the image's entrypoint, as a script of the
// runtime's shell (see Utilities).
type ImageDefault struct {
	// Script is what runs; empty exits 0 at once.
	Script string
	// What says in words what the real image does.
	What string
}

// runUntilStopped is a server's main loop: it runs until stopped, and
// exits 0 on SIGTERM, as nginx and pause do.
const runUntilStopped = `trap 'exit 0' TERM
while true; do sleep 3600; done`

const httpdScript = `echo "[mpm_event:notice] AH00489: Apache/2.4 (Unix) configured -- resuming normal operations"
echo "[core:notice] AH00094: Command line: 'httpd -D FOREGROUND'"
trap 'exit 0' TERM
while true; do sleep 3600; done`

// ImageDefaults are the entrypoints of well-known images, by repository
// (the image name without tag or digest, as PullImage names it). An image
// not listed runs UnknownImageDefault.
var ImageDefaults = map[string]ImageDefault{
	"docker.io/library/nginx": {
		What: "serves HTTP until stopped; exits 0 on SIGTERM",
		Script: `echo "/docker-entrypoint.sh: Configuration complete; ready for start up"
trap 'echo "signal 15 (SIGTERM) received, exiting"; exit 0' TERM
while true; do sleep 3600; done`,
	},
	"docker.io/library/httpd": {
		What:   "serves HTTP until stopped; exits 0 on SIGTERM",
		Script: httpdScript,
	},
	"registry.k8s.io/e2e-test-images/httpd": {
		What:   "the Kubernetes e2e tests' httpd: as docker.io/library/httpd",
		Script: httpdScript,
	},
	"registry.k8s.io/pause": {
		What:   "the sandbox's placeholder process: sleeps until stopped; exits 0 on SIGTERM",
		Script: runUntilStopped,
	},
	"docker.io/library/busybox": {
		What: "sh: with no terminal attached it reads an empty stdin and exits 0 at once",
	},
	"docker.io/library/alpine": {
		What: "sh: with no terminal attached it reads an empty stdin and exits 0 at once",
	},
}

// UnknownImageDefault is what an image missing from ImageDefaults runs:
// like a server, until stopped.
var UnknownImageDefault = ImageDefault{
	What:   "unknown image: assumed to be a server that runs until stopped and exits 0 on SIGTERM",
	Script: runUntilStopped,
}

// imageDefault returns the default of the image named ref ("nginx:1.27",
// "docker.io/library/busybox@sha256:…", …).
func imageDefault(ref string) ImageDefault {
	if d, ok := ImageDefaults[repository(normalizeRef(ref))]; ok {
		return d
	}
	return UnknownImageDefault
}

// repository is a normalized reference without its tag or digest.
func repository(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}
