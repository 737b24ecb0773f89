package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Subsystem is a part of the kubelet a library comment may say is missing
// ("there is no prober yet"). It exists once Dir holds a Go package (and,
// when Ident is set, that package declares Ident); from then on such a
// sentence is false.
type Subsystem struct {
	// Name is how a comment names it: a regular expression matched
	// case-insensitively as whole words ("prober|probes?").
	Name string
	// Dir is the package, relative to the repository root: mylib/prober.
	Dir string
	// Ident, if set, is the identifier that makes it exist in Dir.
	Ident string
}

// Subsystems are the parts the library's comments have said were missing.
// A sentence that says one is missing fails TestLibrarySaysNoPartIsMissing
// once the part exists; a part listed before it is written makes the
// sentences saying so go stale loudly the day it lands.
var Subsystems = []Subsystem{
	{Name: `(?:HTTP )?prober(?: client)?|probe manager|probes?|probe reasons`, Dir: "mylib/prober"},
	{Name: `(?:kubelet |HTTP |debug )?server`, Dir: "mylib/server"},
	{Name: `status manager`, Dir: "mylib/status"},
	{Name: `pod workers?`, Dir: "mylib/podworkers"},
	{Name: `PLEG|pod lifecycle event generator`, Dir: "mylib/pleg"},
	{Name: `(?:node )?lease(?: controller)?`, Dir: "mylib/nodelease"},
	{Name: `rotated logs|log rotation|log manager`, Dir: "mylib/logs"},
	{Name: `garbage collect(?:ion|or)|container GC`, Dir: "mylib/kuberuntime", Ident: "ContainerGC"},
	{Name: `crash ?loop back-?off|back-?off`, Dir: "mylib/kuberuntime", Ident: "NewCrashLoopBackOff"},
	{Name: `defaults`, Dir: "mylib/kubeletconfig", Ident: "SetDefaults"},
	{Name: `admission|admit handlers?`, Dir: "mylib/lifecycle"},
	{Name: `eviction(?: manager)?|eviction reasons`, Dir: "mylib/eviction", Ident: "NewManager"},
	{Name: `image (?:GC|garbage collect(?:ion|or))(?: manager)?|image garbage collection`, Dir: "mylib/images", Ident: "NewImageGCManager"},
	{Name: `(?:node )?pressure(?: conditions)?`, Dir: "mylib/eviction", Ident: "NewManager"},
	{Name: `volume(?: manager)?|volumes|volume reasons`, Dir: "mylib/volumemanager"},
	{Name: `configmap manager`, Dir: "mylib/configmap"},
	{Name: `secret manager`, Dir: "mylib/secret"},
	{Name: `token manager|TokenRequest`, Dir: "mylib/token"},
	{Name: `atomic writer`, Dir: "mylib/volume/util"},
	{Name: `emptyDir|empty-dir`, Dir: "mylib/volume/emptydir"},
	{Name: `downward API`, Dir: "mylib/volume/downwardapi"},
	{Name: `cluster DNS|DNS configurer|pod DNS(?: config)?`, Dir: "mylib/network/dns"},
	{Name: `metrics`, Dir: "mylib/metrics"},
	{Name: `stats(?: provider)?|/stats(?:/summary)?|summary API|CPU (?:and|or) memory (?:usage|stats)`, Dir: "mylib/stats"},
	{Name: `resource metrics|/metrics/resource`, Dir: "mylib/metrics/collectors"},
	{Name: `syncloop(?: health)? check|health checks?|/healthz checks?`, Dir: "mylib/kubelet", Ident: "SyncLoopHealthCheck"},
}

// A sentence says a part is missing when it reads "no X … yet" (up to four
// words may come between "no" and X, for a list: "no volume, eviction or
// probe reasons yet"), or "this kubelet has no X", "there is no X", "there
// are no X" with or without "yet".
const (
	listGap   = `(?:[\w/-]+,?\s+(?:or\s+|and\s+)?){0,4}?`
	sentence  = `[^.;]*?` // within one sentence
	noPrefix  = `(?i)\bno\s+` + listGap
	hasPrefix = `(?i)\b(?:this kubelet has|there is|there are)\s+no\s+` + listGap
)

type absence struct {
	sub      Subsystem
	yet, has *regexp.Regexp
}

func absences(subs []Subsystem) []absence {
	out := make([]absence, len(subs))
	for i, s := range subs {
		x := `(?:` + s.Name + `)\b`
		out[i] = absence{
			sub: s,
			yet: regexp.MustCompile(noPrefix + x + sentence + `\byet\b`),
			has: regexp.MustCompile(hasPrefix + x),
		}
	}
	return out
}

// commentText is a comment group's text with the comment markers gone and
// every run of white space one space, so a sentence broken over lines
// reads as one.
func commentText(g *ast.CommentGroup) string {
	return strings.Join(strings.Fields(g.Text()), " ")
}

// lineOfWord is the position of the comment line of g that holds its n-th
// word (counted from 0), or g's own position.
func lineOfWord(g *ast.CommentGroup, n int) token.Pos {
	for _, c := range g.List {
		t := strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*")
		w := len(strings.Fields(t))
		if n < w {
			return c.Pos()
		}
		n -= w
	}
	return g.Pos()
}

// StaleAbsences returns the comments of a Go source file that say a
// subsystem is missing ("no prober yet") although exists reports it
// exists, as "file:line: the sentence (X exists: dir)".
func StaleAbsences(filename string, src []byte, subs []Subsystem, exists func(Subsystem) bool) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	as := absences(subs)
	for _, g := range f.Comments {
		text := commentText(g)
		for _, a := range as {
			loc := a.yet.FindStringIndex(text)
			if loc == nil {
				loc = a.has.FindStringIndex(text)
			}
			if loc == nil || !exists(a.sub) {
				continue
			}
			where := a.sub.Dir
			if a.sub.Ident != "" {
				where += "." + a.sub.Ident
			}
			pos := fset.Position(lineOfWord(g, len(strings.Fields(text[:loc[0]]))))
			out = append(out, pos.String()+": \""+text[loc[0]:loc[1]]+"\" ("+where+" exists)")
		}
	}
	return out, nil
}

// SubsystemExists reports whether s exists in the repository at root.
func SubsystemExists(root string, s Subsystem) bool {
	dir := filepath.Join(root, s.Dir)
	if s.Ident != "" {
		ok, err := PackageDeclares(dir, s.Ident)
		return err == nil && ok
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			return true
		}
	}
	return false
}

// PackageDocs returns the non-test Go files in dir that carry a package
// doc comment (a comment right above the package clause). A package should
// have exactly one: go doc shows them all, run together, in file order.
func PackageDocs(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, src, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if f.Doc != nil {
			out = append(out, filepath.Base(p))
		}
	}
	return out, nil
}
