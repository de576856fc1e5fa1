package jsjsonata

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonataSHA256 is the SHA-256 of jsonata.min.js in npm jsonata 2.2.2. `make jsonata` checks
// the committed file against the package itself.
const jsonataSHA256 = "69ff11451fd9b46fadf9008b9d6c291f87de16bea99abffb48fcaa1dccab03f6"

func TestEmbeddedJSONataIsThePinnedBuild(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte(Source))
	assert.Equal(t, jsonataSHA256, hex.EncodeToString(sum[:]))

	pkg, err := os.ReadFile("package.json")
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`"jsonata": "2\.2\.2"`), string(pkg))
	lock, err := os.ReadFile("package-lock.json")
	require.NoError(t, err)
	assert.Contains(t, string(lock), `"integrity": "sha512-XDFH2PuaAXv0AXJEWwElXbqADmKFGKMLMkFb+qOz0EhjQW2EIJ6pgtordLU+4u3IVERyBfqy6bi6kZKEncvRqA=="`)
	_, err = os.Stat("LICENSE")
	assert.NoError(t, err, "the MIT licence of the embedded build must ship with it")
}
