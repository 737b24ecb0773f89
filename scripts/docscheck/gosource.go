package docscheck

import (
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// chapterNumber matches a chapter named by its number: "chapter 05",
// "chapters 06 and later", "chapters/02-bootstrap-token". A renumbering
// would stale such a text silently, so library code must not hold one.
var chapterNumber = regexp.MustCompile(`(?i)\bchapters?\s+[0-9]{1,2}\b|chapters/[0-9]{2}-`)

// ChapterNumbers returns the comments and string literals of a Go source
// file that name a chapter by its number, as "file:line: text".
func ChapterNumbers(filename string, src []byte) []string {
	fset := token.NewFileSet()
	file := fset.AddFile(filename, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var out []string
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok != token.COMMENT && tok != token.STRING {
			continue
		}
		if m := chapterNumber.FindString(lit); m != "" {
			out = append(out, fset.Position(pos).String()+": "+m)
		}
	}
}

// goRef matches a Go identifier named with its package path, as READMEs
// write it: mylib/bootstrap.LoadClientCert.
var goRef = regexp.MustCompile("mylib/([a-z0-9/]+)\\.([A-Z][A-Za-z0-9_]*)")

// GoRef is a package and an identifier a README names.
type GoRef struct{ Pkg, Ident string }

// GoRefs returns the Go identifiers a markdown text names as
// mylib/<pkg>.<Ident>.
func GoRefs(markdown string) []GoRef {
	seen := map[GoRef]bool{}
	for _, m := range goRef.FindAllStringSubmatch(markdown, -1) {
		seen[GoRef{"mylib/" + strings.TrimSuffix(m[1], "/"), m[2]}] = true
	}
	var out []GoRef
	for r := range seen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pkg+out[i].Ident < out[j].Pkg+out[j].Ident })
	return out
}

// PackageDeclares reports whether the Go package in dir (its non-test
// files) declares name at top level: a func, type, var or const.
func PackageDeclares(dir, name string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return false, err
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		af, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			return false, err
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == name {
					return true, nil
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.Name == name {
							return true, nil
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.Name == name {
								return true, nil
							}
						}
					}
				}
			}
		}
	}
	return false, nil
}

// houseRow matches a row of the top-level README's map of the house:
// | `mylib/<pkg>` | upstream | first chapter |.
var houseRow = regexp.MustCompile("(?m)^\\|\\s*`(mylib/[a-z0-9/]+)`\\s*\\|")

// HouseMap returns the mylib packages listed in the markdown's "Map of the
// house" section, in order.
func HouseMap(markdown string) []string {
	_, section, ok := strings.Cut(markdown, "## Map of the house")
	if !ok {
		return nil
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var out []string
	for _, m := range houseRow.FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	return out
}

// GoPackages returns the directories under root/dir that hold a Go package
// (a non-test .go file), relative to root.
func GoPackages(root, dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != filepath.Join(root, dir) && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			if len(out) == 0 || out[len(out)-1] != rel {
				out = append(out, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	sort.Strings(out)
	return compact(out), err
}

func compact(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
