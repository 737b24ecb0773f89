package container

import "strings"

// Expand replaces each $(VAR) in input by mapping(VAR), as Kubernetes
// expands env values, command and args (upstream
// third_party/forked/golang/expansion): "$$" is a literal "$", and a "$("
// without its ")" or any other "$x" is left as written.
func Expand(input string, mapping func(string) string) string {
	var b strings.Builder
	for i := 0; i < len(input); i++ {
		if input[i] != '$' || i+1 == len(input) {
			b.WriteByte(input[i])
			continue
		}
		switch next := input[i+1]; next {
		case '$': // escaped
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(input[i+2:], ')')
			if end < 0 { // unterminated: keep "$(" and go on
				b.WriteString("$(")
				i++
				continue
			}
			b.WriteString(mapping(input[i+2 : i+2+end]))
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// MappingFuncFor returns a mapping for Expand that looks a name up in each
// map in turn; a name found nowhere expands to itself, "$(NAME)".
func MappingFuncFor(context ...map[string]string) func(string) string {
	return func(name string) string {
		for _, vars := range context {
			if v, ok := vars[name]; ok {
				return v
			}
		}
		return "$(" + name + ")"
	}
}
