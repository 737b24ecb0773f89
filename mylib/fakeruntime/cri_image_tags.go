package fakeruntime

import (
	"slices"
	"strconv"
	"strings"
)

// The registry's rule: a repository of the catalogue answers for the tags
// it publishes, written down once below (its Published table), and for no
// other: a pull of "nginx:1.161" (the Kubernetes documentation's typo of
// 1.16.1) fails with containerd's "not found", as the registry's "manifest
// unknown" makes it fail on a real node. A tag of KnownRepository.Images and
// "latest" are always published; a pull by digest always works (the
// digests are not written down); a repository the catalogue does not know,
// or one without a table, pulls any tag, as before.
//
// The tables were written from the registries' tag lists; they keep the
// release lines and the variants, not each tag one by one, so they also
// accept a few tags the registry never had (nginx 1.7.0, say). A tag the
// registry has that a table misses is the table's fault: add it.

// Published is what tags a repository's registry serves.
type Published struct {
	// Tags are tags as they are: "stable", "3.9", "1".
	Tags []string
	// Releases are release lines: {"1.27", 5} publishes 1.27 and 1.27.0
	// to 1.27.5.
	Releases []Release
	// Variants are the suffixes every release tag and every tag of Tags
	// but latest also comes with: "alpine" publishes 1.27-alpine,
	// 1.27.5-alpine and stable-alpine.
	Variants []string
}

// Release is a release line and its last patch release.
type Release struct {
	Line string
	Last int
}

// has: the table publishes tag.
func (p *Published) has(tag string) bool {
	if tag == "latest" || p.hasBase(tag) {
		return true
	}
	for _, v := range p.Variants {
		if base, ok := strings.CutSuffix(tag, "-"+v); ok && base != "latest" && p.hasBase(base) {
			return true
		}
	}
	return false
}

func (p *Published) hasBase(tag string) bool {
	if slices.Contains(p.Tags, tag) {
		return true
	}
	for _, r := range p.Releases {
		if tag == r.Line {
			return true
		}
		if patch, ok := strings.CutPrefix(tag, r.Line+"."); ok {
			if n, err := strconv.Atoi(patch); err == nil && n >= 0 && n <= r.Last && strconv.Itoa(n) == patch {
				return true
			}
		}
	}
	return false
}

// numbered is prefix+first+suffix … prefix+last+suffix: agnhost's 2.9 …
// 2.59, etcd's 3.5.0-0 … 3.5.24-0.
func numbered(prefix string, first, last int, suffix string) []string {
	var tags []string
	for n := first; n <= last; n++ {
		tags = append(tags, prefix+strconv.Itoa(n)+suffix)
	}
	return tags
}

// The tables of the catalogue's repositories (KnownImages).
var (
	// nginx: the mainline and stable lines since 1.7 (1.7.9 is in old
	// documentation; 1.14.2 and 1.16.1 in today's), on Debian or Alpine.
	nginxTags = &Published{
		Tags: []string{"stable", "mainline", "1", "alpine", "perl", "alpine-perl", "alpine-slim", "otel", "alpine-otel", "bookworm", "trixie"},
		Releases: []Release{{"1.7", 12}, {"1.8", 1}, {"1.9", 15}, {"1.10", 3}, {"1.11", 13}, {"1.12", 2}, {"1.13", 12}, {"1.14", 2},
			{"1.15", 12}, {"1.16", 1}, {"1.17", 10}, {"1.18", 0}, {"1.19", 10}, {"1.20", 2}, {"1.21", 6}, {"1.22", 1}, {"1.23", 4},
			{"1.24", 0}, {"1.25", 5}, {"1.26", 3}, {"1.27", 5}, {"1.28", 0}, {"1.29", 3}},
		Variants: []string{"alpine", "perl", "alpine-perl", "alpine-slim", "otel", "alpine-otel",
			"bookworm", "bookworm-perl", "bookworm-otel", "bullseye", "bullseye-perl", "trixie", "trixie-perl", "trixie-otel"},
	}
	busyboxTags = &Published{
		Tags: []string{"stable", "unstable", "1", "glibc", "musl", "uclibc"},
		Releases: []Release{{"1.23", 2}, {"1.24", 2}, {"1.25", 1}, {"1.26", 2}, {"1.27", 2}, {"1.28", 4}, {"1.29", 3}, {"1.30", 1},
			{"1.31", 1}, {"1.32", 1}, {"1.33", 1}, {"1.34", 1}, {"1.35", 0}, {"1.36", 1}, {"1.37", 0}},
		Variants: []string{"glibc", "musl", "uclibc"},
	}
	alpineTags = &Published{
		Tags: []string{"edge", "3"},
		Releases: []Release{{"3.1", 4}, {"3.2", 3}, {"3.3", 3}, {"3.4", 6}, {"3.5", 3}, {"3.6", 5}, {"3.7", 3}, {"3.8", 5},
			{"3.9", 6}, {"3.10", 9}, {"3.11", 13}, {"3.12", 12}, {"3.13", 12}, {"3.14", 10}, {"3.15", 11}, {"3.16", 9},
			{"3.17", 10}, {"3.18", 12}, {"3.19", 8}, {"3.20", 8}, {"3.21", 5}, {"3.22", 2}},
	}
	httpdTags = &Published{
		Tags:     []string{"2", "alpine", "bookworm", "trixie"},
		Releases: []Release{{"2.2", 34}, {"2.4", 65}},
		Variants: []string{"alpine", "bookworm", "bullseye", "trixie"},
	}
	e2eHttpdTags = &Published{Tags: []string{"2.4.38-1", "2.4.38-2", "2.4.38-3", "2.4.38-4", "2.4.39-1", "2.4.39-2", "2.4.39-3", "2.4.39-4"}}
	// pause: every image the Kubernetes releases have used.
	pauseTags   = &Published{Tags: []string{"0.8.0", "1.0", "2.0", "3.0", "3.1", "3.2", "3.3", "3.4.1", "3.5", "3.6", "3.7", "3.8", "3.9", "3.10", "3.10.1"}}
	agnhostTags = &Published{Tags: numbered("2.", 9, 59, "")}
	goproxyTags = &Published{Tags: []string{"0.1"}}
	etcdTags    = &Published{Tags: slices.Concat(numbered("3.4.", 3, 37, "-0"), numbered("3.5.", 0, 24, "-0"), numbered("3.6.", 0, 6, "-0"))}
	// registry.k8s.io/busybox: what gcr.io/google-containers/busybox had.
	k8sBusyboxTags = &Published{Tags: []string{"1.24", "1.27", "1.27.2"}}
	e2eBusyboxTags = &Published{Tags: []string{"1.29-1", "1.29-2", "1.29-3", "1.29-4", "1.36.1-1", "1.37.0-1"}}
	stressTags     = &Published{Tags: []string{"1.0.4"}}
)

// published: the registry serves repo's tag (the rule above).
func published(k *KnownRepository, tag string) bool {
	if k == nil || k.Published == nil || tag == "" {
		return true // unknown repository, no table, or a digest
	}
	for _, ki := range k.Images {
		if slices.Contains(ki.Tags, tag) {
			return true
		}
	}
	return k.Published.has(tag)
}
