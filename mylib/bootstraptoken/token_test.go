package bootstraptoken

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pattern of k8s.io/cluster-bootstrap/token/api.BootstrapTokenPattern.
var tokenPattern = regexp.MustCompile(`\A([a-z0-9]{6})\.([a-z0-9]{16})\z`)

func TestGenerateHasTheBootstrapTokenFormat(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		tok, err := Generate()
		require.NoError(t, err)
		require.Regexp(t, tokenPattern, tok.String())
		require.False(t, seen[tok.String()], "token %d repeats an earlier one", i)
		seen[tok.String()] = true
	}
}

func TestGenerateUsesEveryCharacterEvenly(t *testing.T) {
	// 1000 tokens × 22 characters: each of the 36 characters is expected
	// ~611 times; a biased or broken source would leave some far off.
	counts := map[rune]int{}
	for i := 0; i < 1000; i++ {
		tok, err := Generate()
		require.NoError(t, err)
		for _, c := range tok.ID + tok.Secret {
			counts[c]++
		}
	}
	require.Len(t, counts, len(alphabet))
	for c, n := range counts {
		assert.InDelta(t, 611, n, 150, "character %q", c)
	}
}

func TestGenerateFromMapsBytesWithoutModuloBias(t *testing.T) {
	// Bytes 252..255 would make a–d more likely than the rest: they are skipped.
	in := []byte{0, 1, 35, 36, 252, 253, 254, 255, 71, 251}
	in = append(in, bytes.Repeat([]byte{9}, 40)...)
	tok, err := GenerateFrom(bytes.NewReader(in))
	require.NoError(t, err)
	// 0→a 1→b 35→9 36→a (skip 252–255) 71→9 251→9 (251%36=35)
	assert.Equal(t, "ab9a99", tok.ID)
	assert.Equal(t, strings.Repeat("j", 16), tok.Secret)
}

func TestGenerateFromFailsWhenTheSourceFails(t *testing.T) {
	_, err := GenerateFrom(bytes.NewReader([]byte{1, 2, 3}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "generate bootstrap token")
}

func TestParseAcceptsAWellFormedToken(t *testing.T) {
	tok, err := Parse("abcdef.0123456789abcdef")
	require.NoError(t, err)
	assert.Equal(t, Token{ID: "abcdef", Secret: "0123456789abcdef"}, tok)
	assert.Equal(t, "bootstrap-token-abcdef", tok.SecretName())
	assert.Equal(t, "system:bootstrap:abcdef", tok.Username())
}

func TestParseRefusesMalformedTokens(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "got no dot"},
		{"abcdef0123456789abcdef", "got no dot"},
		{"abcde.0123456789abcdef", "the id before the dot must be 6 characters from [a-z0-9] (like abcdef.0123456789abcdef), got 5 characters"},
		{"ABCDEF.0123456789abcdef", `the id "ABCDEF"`},
		{"abcdef.0123456789abcde", "the secret after the dot must be 16 characters from [a-z0-9], got 15 characters"},
		{"abcdef.0123456789ABCDEF", "the secret after the dot must be 16"},
		{"abcdef.0123456789abcdef.x", "the secret after the dot"},
		{"abc-ef.0123456789abcdef", `the id "abc-ef"`},
	} {
		_, err := Parse(tc.in)
		require.Error(t, err, "input %q", tc.in)
		assert.Contains(t, err.Error(), "malformed bootstrap token", "input %q", tc.in)
		assert.Contains(t, err.Error(), tc.want, "input %q", tc.in)
	}
}

func TestParseNeverEchoesTheSecret(t *testing.T) {
	_, err := Parse("abcdef.s3cr3tvalue99XY")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3tvalue99XY")
}

// TestParseOfSwappedPartsNeverEchoesTheSecret: "<secret>.<id>" puts the
// secret where the id goes; the error must not print it as "the id".
func TestParseOfSwappedPartsNeverEchoesTheSecret(t *testing.T) {
	_, err := Parse("s3cr3tvalue99xyz.abcdef")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3tvalue99xyz")
	assert.EqualError(t, err, "malformed bootstrap token: 16 characters before the dot and 6 after: the parts look swapped, want <id>.<secret> (like abcdef.0123456789abcdef)")
	// A secret of another length before the dot is not echoed either.
	_, err = Parse("s3cr3tvalue99xyz1.abcdef")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3tvalue99xyz1")
}
