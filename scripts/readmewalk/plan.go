package readmewalk

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

var chapterArgRe = regexp.MustCompile(`^[0-9][0-9]$`)

// Plan returns the READMEs a tour of the given chapters walks, relative to
// root and in order: README.md (the cluster and $NODE_NAME), then the
// chapters. No chapters: every chapter. Otherwise the chapters named, and
// before them, in the course's order, what they need: the chapters their
// <!-- walk: needs chapters="…" --> markers name, and what those need.
func Plan(root string, chapters []string) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(root, "chapters", "[0-9][0-9]-*", "README.md"))
	if err != nil {
		return nil, err
	}
	byNum := map[string]string{} // "05" -> chapters/05-pleg/README.md
	for _, d := range dirs {
		rel, _ := filepath.Rel(root, d)
		byNum[filepath.Base(filepath.Dir(d))[:2]] = rel
	}
	want := map[string]bool{}
	if len(chapters) == 0 {
		for n := range byNum {
			want[n] = true
		}
	}
	var add func(n, from string) error
	add = func(n, from string) error {
		if !chapterArgRe.MatchString(n) {
			return fmt.Errorf("chapters are named by their two digits, e.g. 'scripts/tour.sh 01 02' (got '%s')", n)
		}
		readme, ok := byNum[n]
		if !ok {
			if from != "" {
				return fmt.Errorf("%s needs chapter %s, and there is no chapter %s (see chapters/)", from, n, n)
			}
			return fmt.Errorf("there is no chapter %s (see chapters/)", n)
		}
		if want[n] {
			return nil
		}
		want[n] = true
		md, err := os.ReadFile(filepath.Join(root, readme))
		if err != nil {
			return err
		}
		steps, err := Parse(string(md))
		if err != nil {
			return fmt.Errorf("%s: %w", readme, err)
		}
		for _, s := range steps {
			if s.Action != Needs {
				continue
			}
			for _, dep := range strings.Fields(s.Attrs["chapters"]) {
				if dep >= n {
					return fmt.Errorf("%s:%d: walk: needs chapter %s, which comes after it", readme, s.Line, dep)
				}
				if err := add(dep, readme); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, n := range chapters {
		if err := add(n, ""); err != nil {
			return nil, err
		}
	}
	var nums []string
	for n := range want {
		nums = append(nums, n)
	}
	sort.Strings(nums)
	plan := []string{"README.md"}
	for _, n := range nums {
		plan = append(plan, byNum[n])
	}
	return plan, nil
}
