package sandboxproc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"mvdan.cc/sh/v3/syntax"
)

// TestBraceWordsCountsWhatBraceExpansionMakes: the count of words a
// brace expansion makes of a word, and the text of each, before the
// interpreter makes them.
func TestBraceWordsCountsWhatBraceExpansionMakes(t *testing.T) {
	for _, c := range []struct {
		word        string
		words, text int64
	}{
		{"plain", 1, 0},
		{"{1..16000}", 16000, 6},
		{"{16000..1}x", 16000, 7},
		{"{1..10..3}", 4, 3},
		{"{a..e}", 5, 2},
		{"{a,b}{c,d}", 4, 2},
		{"{a,{b,c}}", 3, 1},
		{"pre{aaaa,b}", 2, 7},
		{"{1..100000}", maxBraceWords + 1, 7},
		{"{1..200}{1..200}", maxBraceWords + 1, 8},
	} {
		f, err := syntax.NewParser().Parse(strings.NewReader(": "+c.word), "")
		require.NoError(t, err)
		w := f.Stmts[0].Cmd.(*syntax.CallExpr).Args[1]
		words, text := braceWords(w)
		assert.Equal(t, c.words, words, c.word)
		assert.Equal(t, c.text, text, c.word)
	}
}

// TestDefinitionsAreChargedByName: an alias or function defined again is
// charged once; unalias and unset -f give their charge back.
func TestDefinitionsAreChargedByName(t *testing.T) {
	var d definitions
	d.set("alias a", 100)
	d.set("alias a", 100)
	d.set("alias b", 10)
	f, err := syntax.NewParser().Parse(strings.NewReader("f() { : xxxx; }; g() { :; }"), "")
	require.NoError(t, err)
	d.defineFunctions(f)
	assert.Equal(t, int64(len("alias a")+100+len("alias b")+10+len("func f")+15+len("func g")+10+4*definitionOverhead), d.size())
	d.removeAliases()
	d.remove("func f")
	assert.Equal(t, int64(len("func g")+10+definitionOverhead), d.size())
	d.remove("func g")
	assert.Zero(t, d.size())
}
