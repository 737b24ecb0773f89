package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// repoPath matches a path into the repository as READMEs write it, e.g.
// scripts/cluster.sh, chapters/01-node-lease/, yaml/static/nginx.yaml.
var repoPath = regexp.MustCompile("(?:^|[\\s`(\\[\"'=])\\.?/?((?:chapters|mylib|yaml|scripts)/[A-Za-z0-9_./-]*[A-Za-z0-9_/])")

// goIdent is a Go identifier after a package path: ".LoadClientCert".
var goIdent = regexp.MustCompile(`\.[A-Z][A-Za-z0-9_]*$`)

// Paths returns the repository paths a markdown text names.
func Paths(markdown string) []string {
	seen := map[string]bool{}
	for _, m := range repoPath.FindAllStringSubmatch(markdown, -1) {
		p := strings.TrimSuffix(m[1], "/")
		p = goIdent.ReplaceAllString(p, "") // mylib/bootstrap.LoadClientCert names mylib/bootstrap
		if strings.ContainsAny(p, "*<>") || strings.Contains(p, "NN-") {
			continue // a pattern, not a path
		}
		seen[p] = true
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// MissingPaths returns the paths named in the markdown file that do not exist
// under root.
func MissingPaths(root, readme string) ([]string, error) {
	b, err := os.ReadFile(readme)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, p := range Paths(string(b)) {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

// chapterRun matches `go run ./chapters/NN-slug` and the flags after it on
// the same line.
var chapterRun = regexp.MustCompile(`go run \./chapters/([0-9]{2}-[a-z0-9-]+)([^\n|;&]*)`)
var flagName = regexp.MustCompile(`(?:^|\s)--?([a-z][a-z0-9-]*)`)

// ChapterFlags returns, for each chapter a markdown text runs with `go run`,
// the flags it passes.
func ChapterFlags(markdown string) map[string][]string {
	out := map[string][]string{}
	for _, m := range chapterRun.FindAllStringSubmatch(markdown, -1) {
		flags := out[m[1]]
		for _, f := range flagName.FindAllStringSubmatch(m[2], -1) {
			flags = append(flags, f[1])
		}
		out[m[1]] = flags
	}
	return out
}

// HelpDefines reports whether a Go program's -h output defines flag name.
func HelpDefines(help, name string) bool {
	return regexp.MustCompile(`(?m)^\s+--?` + regexp.QuoteMeta(name) + `(\s|$)`).MatchString(help)
}

// FormatMissing lists missing references one per line.
func FormatMissing(readme string, missing []string) string {
	var b strings.Builder
	for _, m := range missing {
		fmt.Fprintf(&b, "%s names %s, which does not exist\n", readme, m)
	}
	return b.String()
}
