package i18n_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/i18n"
)

// Every literal key the views and handlers use must be in the catalog.
func TestUsedKeysExist(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`(?:\.T\(|\bt\(c, |Errorf\([A-Za-z.]+, )"([a-z_]+\.[a-z_.]+)"`)
	var missing []string
	for _, dir := range []string{"../views", "../web", "../studio"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			if !strings.HasSuffix(f, ".templ") && (!strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_templ.go")) {
				continue
			}
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				// A key ending in a dot is a prefix completed at run time ("state." + s).
				if !strings.HasSuffix(m[1], ".") && !i18n.Has(m[1]) {
					missing = append(missing, f+": "+m[1])
				}
			}
		}
	}
	require.Empty(t, missing)
}
