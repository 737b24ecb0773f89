package fakeruntime

// The runtime has no registry to ask, so what a registry would tell it about
// well-known images is written down here, in one place: KnownImages. A name
// not found here still pulls, with an ID made up from the name (see
// resolve), the default UnknownImageDefault and user root; a tag a known
// repository does not publish does not (cri_image_tags.go).

// ImageDefault is what a container of an image runs when its config gives
// no command and no args: the image's entrypoint, as a script of the
// runtime's shell (see Utilities).
type ImageDefault struct {
	// Script is what runs; empty exits 0 at once.
	Script string
	// What says in words what the real image does.
	What string
	// Shell: the default command is a shell, which, in a container with
	// a stdin (Config.Stdin), reads its commands from it.
	Shell bool
	// Process is the real image's command line, which ps lists the
	// default command as (pid_namespace.go), and not the utilities its
	// Script runs to play it. Nil: the repository's last name element,
	// unless Shell or Script is empty.
	Process []string
}

// KnownRepository is one image repository as a registry serves it: the
// names it goes by, the configuration its images share, and the images some
// of its tags point at.
type KnownRepository struct {
	// Names are the repository's normalized names. The others name the same
	// images as the first: a mirror or the registry's former name
	// (k8s.gcr.io/pause is registry.k8s.io/pause).
	Names []string
	// Default is what its containers run with no command.
	Default ImageDefault
	// User is the image configuration's USER ("1002", "www-data",
	// "1003:1004"); empty is root. ImageStatus reports it as uid or username.
	User string
	// Images are the tags whose image is known. Another tag Published
	// lists still pulls, with an image ID made up from its name.
	Images []KnownImage
	// Published is the tags the registry serves besides Images' (and
	// latest): a pull of another tag fails, as for a tag the registry does
	// not know (cri_image_tags.go). Nil: every tag pulls.
	Published *Published
	// Size is about the size of its images in bytes, as `crictl images`
	// shows a typical tag's (the compressed layers, as containerd counts
	// them): a tag whose image is not in Images has this size, within 5%
	// (made up from its name). Zero: made up from the name, 2 MB to 200 MB.
	// The sizes make a few pulls fill a small image filesystem.
	Size uint64
	// Entrypoint is the image configuration's ENTRYPOINT (with its CMD
	// folded in when the image has one): a container given no command
	// runs it, followed by its args, as containerd does. Empty: a
	// container given no command runs Default, or its args alone.
	Entrypoint []string
	// Programs are the only programs its images have, for an image with
	// no shell (the pause image has /pause alone): an exec of any other
	// command fails as runc's does, "executable file not found in $PATH"
	// (cri_exec.go). Nil: the image has a shell and the utilities, as
	// busybox has.
	Programs []string
}

// KnownImage is one image and the tags that point at it: pulled by any of
// its tags, from any name of its repository, or as name@Digest, it is one
// image with one ID.
type KnownImage struct {
	Tags []string
	// Digest is the manifest digest ("sha256:<64 hex>") the tags resolve to.
	// Empty: made up from the first name and tag, the real one is not
	// recorded here.
	Digest string
	// ID is the image ID, the digest of the image's configuration. Empty:
	// made up like Digest.
	ID string
	// Size is the image's size in bytes, as containerd reports it. Zero: made
	// up like Digest.
	Size uint64
}

// runUntilStopped is a server's main loop: it runs until stopped, and
// exits 0 on SIGTERM, as nginx and pause do.
const runUntilStopped = `trap 'exit 0' TERM
while true; do sleep 3600; done`

const httpdScript = `echo "[mpm_event:notice] AH00489: Apache/2.4 (Unix) configured -- resuming normal operations"
echo "[core:notice] AH00094: Command line: 'httpd -D FOREGROUND'"
trap 'exit 0' TERM
while true; do sleep 3600; done`

// busyboxSh is busybox's default command: sh, which with no terminal
// attached reads an empty stdin and exits 0 at once; with one (stdin: true,
// `kubectl run -it`, `kubectl debug -it`) it reads commands from it.
var busyboxSh = ImageDefault{What: "sh: with no terminal attached it reads an empty stdin and exits 0 at once", Shell: true}

// critestRegistry is where cri-tools' validation suite (critest) keeps its
// test images, all built FROM busybox (cri-tools images/build).
const critestRegistry = "gcr.io/k8s-staging-cri-tools/"

// critestImage is one of critest's busybox-based test images, whose real
// digest is not recorded here.
func critestImage(name, user string, tagGroups ...[]string) KnownRepository {
	repo := KnownRepository{Names: []string{critestRegistry + name}, Default: busyboxSh, User: user, Published: &Published{}}
	for _, tags := range tagGroups {
		repo.Images = append(repo.Images, KnownImage{Tags: tags})
	}
	return repo
}

// KnownImages is the runtime's catalogue of images: real images a learner
// meets in the Kubernetes documentation and tests, with the real digests,
// IDs and sizes where they are recorded here.
var KnownImages = []KnownRepository{
	{
		Names:      []string{"docker.io/library/nginx"},
		Published:  nginxTags,
		Size:       72_000_000,
		Entrypoint: []string{"nginx", "-g", "daemon off;"},
		Default: ImageDefault{
			What: "serves HTTP until stopped; exits 0 on SIGTERM (a container given no command runs the nginx server command, Entrypoint)",
			Script: `echo "/docker-entrypoint.sh: Configuration complete; ready for start up"
trap 'echo "signal 15 (SIGTERM) received, exiting"; exit 0' TERM
while true; do sleep 3600; done`,
		},
	},
	// The images of the Kubernetes documentation's probe examples, with
	// the servers they run (shell_servers.go).
	{
		Names:      []string{"registry.k8s.io/e2e-test-images/agnhost"},
		Published:  agnhostTags,
		Size:       51_000_000,
		Default:    ImageDefault{What: "agnhost: the Kubernetes e2e tests' many-purpose server; the mock runs its liveness subcommand (HTTP :8080 /healthz, 200 for 10 s, then 500) and its stress subcommand (memory growing step by step)"},
		Entrypoint: []string{"/agnhost"},
	},
	{
		Names:      []string{"registry.k8s.io/goproxy"},
		Published:  goproxyTags,
		Size:       2_600_000,
		Default:    ImageDefault{What: "an HTTP proxy on :8080 (TCP probes' example)"},
		Entrypoint: []string{"/goproxy"},
	},
	{
		Names:     []string{"registry.k8s.io/etcd"},
		Published: etcdTags,
		Size:      57_000_000,
		Default:   ImageDefault{What: "etcd: run as /usr/local/bin/etcd, it serves the gRPC health service on its client port (2379)"},
	},
	{
		Names:     []string{"docker.io/library/httpd"},
		Published: httpdTags,
		Size:      58_000_000,
		Default:   ImageDefault{What: "serves HTTP until stopped; exits 0 on SIGTERM", Script: httpdScript, Process: []string{"httpd", "-DFOREGROUND"}},
	},
	{
		Names:     []string{"registry.k8s.io/e2e-test-images/httpd"},
		Published: e2eHttpdTags,
		Size:      40_000_000,
		Default:   ImageDefault{What: "the Kubernetes e2e tests' httpd: as docker.io/library/httpd", Script: httpdScript, Process: []string{"httpd", "-DFOREGROUND"}},
	},
	{
		// The sandbox image. k8s.gcr.io is the registry's name before 2023;
		// it serves the same images.
		Names:     []string{"registry.k8s.io/pause", "k8s.gcr.io/pause"},
		Published: pauseTags,
		Size:      320_000,
		Default: ImageDefault{What: "the sandbox's placeholder process: sleeps until stopped; exits 0 on SIGTERM", Script: runUntilStopped,
			Process: []string{"/pause"}},
		User:     "65535:65535",      // its Dockerfile (kubernetes build/pause) says USER 65535:65535
		Programs: []string{"/pause"}, // it is FROM scratch: no shell, no ls, no sh
		Images: []KnownImage{
			{Tags: []string{"3.9"}, Size: 321_520,
				Digest: "sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097",
				ID:     "sha256:e6f1816883972d4be47bd48879a08919b96afcd344132622e4d444987919323c"},
			{Tags: []string{"3.10"},
				Digest: "sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
				ID:     "sha256:873ed75102791e5b0b8a7fcd41606c92fcec98d56d05ead4ac5131650004c136"},
		},
	},
	{Names: []string{"docker.io/library/busybox"}, Default: busyboxSh, Size: 2_200_000, Published: busyboxTags},
	{Names: []string{"registry.k8s.io/e2e-test-images/busybox"}, Default: busyboxSh, Size: 2_200_000, Published: e2eBusyboxTags},
	{Names: []string{"registry.k8s.io/busybox"}, Default: busyboxSh, Size: 1_300_000, Published: k8sBusyboxTags},
	{Names: []string{"docker.io/library/alpine"}, Default: busyboxSh, Size: 3_600_000, Published: alpineTags},
	{
		// The Kubernetes docs' "Assign Memory Resources to Containers and
		// Pods" runs it with command stress and --vm args (see stress in
		// shell_stress.go: it accounts the bytes, it does not allocate them).
		Names:     []string{"docker.io/polinux/stress"},
		Published: stressTags,
		Size:      4_000_000,
		Default:   ImageDefault{What: "stress(1) with no arguments: prints that no hogs were requested and exits 1", Script: "stress"},
	},

	// critest's image tests: different tags of one image, one tag per image,
	// a pull by digest, and images whose configuration sets USER.
	critestImage("test-image-tags", "", []string{"1", "2", "3"}),
	critestImage("test-image-tag", "", []string{"test"}, []string{"all"}),
	critestImage("test-image-1", "", []string{"latest"}),
	critestImage("test-image-2", "", []string{"latest"}),
	critestImage("test-image-3", "", []string{"latest"}),
	critestImage("test-image-latest", "", []string{"latest"}),
	{
		Names: []string{critestRegistry + "test-image-digest"}, Default: busyboxSh, Published: &Published{},
		// the digest critest pulls it by (cri-tools pkg/validate/consts.go)
		Images: []KnownImage{{Tags: []string{"latest"}, Digest: "sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf"}},
	},
	critestImage("test-image-user-uid", "1002"),
	critestImage("test-image-user-username", "www-data"),
	critestImage("test-image-user-uid-group", "1003:1004"),
	critestImage("test-image-user-username-group", "www-data:1004"),
	critestImage("test-image-predefined-group", "1000"),
}

// UnknownImageDefault is what an image missing from KnownImages runs:
// like a server, until stopped.
var UnknownImageDefault = ImageDefault{
	What:   "unknown image: assumed to be a server that runs until stopped and exits 0 on SIGTERM",
	Script: runUntilStopped,
}

// knownRepository returns the catalogue's entry for a normalized repository
// name, or nil.
func knownRepository(repo string) *KnownRepository {
	for i := range KnownImages {
		for _, n := range KnownImages[i].Names {
			if n == repo {
				return &KnownImages[i]
			}
		}
	}
	return nil
}

// imageDefault returns the default of the image named ref ("nginx:1.27",
// "docker.io/library/busybox@sha256:…", …). CreateContainer asks it with
// the name in the container's config; the kubelet puts the image's ID there,
// which names no repository, so a kubelet's container with no command runs
// UnknownImageDefault (until stopped).
func imageDefault(ref string) ImageDefault {
	return resolve(normalizeRef(ref)).def
}
