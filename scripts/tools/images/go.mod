// The images module builds the offline images of chapter 19 (pause, from
// ./pause, and busybox, from Debian's busybox-static) as image archives and
// imports them into containerd. go-containerregistry writes the docker image
// archive format (manifest.json, config, layers) that `ctr images import`
// reads; the tutorial module never imports it.
module mykubelet/scripts/tools/images

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)
