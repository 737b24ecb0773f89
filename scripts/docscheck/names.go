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

// A README's "How the real kubelet does it" promises that a learner finds
// upstream's words in mylib. A bullet that says "same name(s)" promises every
// Go identifier it quotes (`syncNodeStatus`, `GenericPLEG.Relist`); a bullet
// that says "Ours is `mylib/pkg` (`a`, `b`)" or "Ours: `mylib/pkg` (…)"
// promises the identifiers in those parentheses. An identifier followed by
// "(ours: `Other`)" promises Other instead; one after a possessive
// ("client-go's `FileStore.Update`", "the runtime's `GetPodStatus`") is
// someone else's and promises nothing. Each promised name must be
// declared in one of the mylib packages the bullet names.

// NameClaim is one promised identifier and where to find it.
type NameClaim struct {
	Name     string   // e.g. syncNodeStatus or GenericPLEG.Relist
	Packages []string // mylib/… directories the bullet names
	Bullet   string   // the bullet's first line, for messages
}

var (
	quotedRe   = regexp.MustCompile("`([^`]+)`")
	identRe    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)
	oursRe     = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_.]*)`\\s*\\(ours:\\s*`([A-Za-z_][A-Za-z0-9_.]*)`")
	oursListRe = regexp.MustCompile("(?i)ours(?: is|:)\\s*`(mylib/[a-z0-9/]+)`[^(]*?\\(([^)]*)\\)")
	mylibRe    = regexp.MustCompile("`(mylib/[a-z0-9/]+)(?:\\.[A-Za-z_]+)?`")
	sameNameRe = regexp.MustCompile(`(?i)same names?\b`)
)

// bullets returns the top-level list items of the README's section heading,
// each joined into one line.
func bullets(markdown, heading string) []string {
	var out []string
	in := false
	cur := ""
	flush := func() {
		if cur != "" {
			out = append(out, cur)
			cur = ""
		}
	}
	for _, l := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(l, "## ") {
			flush()
			in = strings.TrimSpace(strings.TrimPrefix(l, "## ")) == heading
			continue
		}
		if !in {
			continue
		}
		switch {
		case strings.HasPrefix(l, "- "):
			flush()
			cur = strings.TrimPrefix(l, "- ")
		case cur != "" && strings.TrimSpace(l) != "":
			cur += " " + strings.TrimSpace(l)
		default:
			flush()
		}
	}
	flush()
	return out
}

// NameClaims returns the identifiers a README promises exist in mylib.
func NameClaims(markdown string) []NameClaim {
	var claims []NameClaim
	for _, b := range bullets(markdown, "How the real kubelet does it") {
		var pkgs []string
		for _, m := range mylibRe.FindAllStringSubmatch(b, -1) {
			pkgs = append(pkgs, m[1])
		}
		if len(pkgs) == 0 {
			continue
		}
		first := b
		if len(first) > 80 {
			first = first[:80] + "…"
		}
		renamed := map[string]string{}
		for _, m := range oursRe.FindAllStringSubmatch(b, -1) {
			renamed[m[1]] = m[2]
		}
		var names []string
		if sameNameRe.MatchString(b) {
			for _, m := range quotedRe.FindAllStringSubmatchIndex(b, -1) {
				if strings.HasSuffix(b[:m[0]], "'s ") {
					continue
				}
				names = append(names, b[m[2]:m[3]])
			}
		}
		for _, m := range oursListRe.FindAllStringSubmatch(b, -1) {
			for _, q := range quotedRe.FindAllStringSubmatchIndex(m[2], -1) {
				if !strings.HasSuffix(m[2][:q[0]], "'s ") {
					names = append(names, m[2][q[2]:q[3]])
				}
			}
		}
		seen := map[string]bool{}
		for _, n := range names {
			if r, ok := renamed[n]; ok {
				n = r
			}
			if !identRe.MatchString(n) || seen[n] {
				continue
			}
			seen[n] = true
			claims = append(claims, NameClaim{Name: n, Packages: pkgs, Bullet: first})
		}
	}
	return claims
}

// Declared returns every identifier declared in the non-test Go files of
// dir: functions, methods (also as Type.Method), types, variables,
// constants, struct fields and interface methods.
func Declared(dir string) (map[string]bool, error) {
	names := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch d := n.(type) {
			case *ast.FuncDecl:
				names[d.Name.Name] = true
				if d.Recv != nil && len(d.Recv.List) == 1 {
					if t := recvType(d.Recv.List[0].Type); t != "" {
						names[t+"."+d.Name.Name] = true
					}
				}
			case *ast.TypeSpec:
				names[d.Name.Name] = true
				if it, ok := d.Type.(*ast.InterfaceType); ok {
					for _, m := range it.Methods.List {
						for _, id := range m.Names {
							names[id.Name] = true
							names[d.Name.Name+"."+id.Name] = true
						}
					}
				}
				if st, ok := d.Type.(*ast.StructType); ok {
					for _, fl := range st.Fields.List {
						for _, id := range fl.Names {
							names[id.Name] = true
							names[d.Name.Name+"."+id.Name] = true
						}
					}
				}
			case *ast.ValueSpec:
				for _, id := range d.Names {
					names[id.Name] = true
				}
			}
			return true
		})
	}
	return names, nil
}

func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	}
	return ""
}

// MissingNames returns the claims of the README (a path under root) whose
// name no package of the bullet declares, one line each.
func MissingNames(root, readme string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, readme))
	if err != nil {
		return nil, err
	}
	var missing []string
	cache := map[string]map[string]bool{}
	for _, c := range NameClaims(string(b)) {
		found := false
		for _, p := range c.Packages {
			if _, ok := cache[p]; !ok {
				d, err := Declared(filepath.Join(root, p))
				if err != nil {
					d = map[string]bool{}
				}
				cache[p] = d
			}
			if cache[p][c.Name] {
				found = true
			}
		}
		if !found {
			missing = append(missing, "`"+c.Name+"` is promised in "+strings.Join(c.Packages, ", ")+" but not declared there (bullet: "+c.Bullet+")")
		}
	}
	return missing, nil
}
