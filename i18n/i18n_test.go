package i18n

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

var verb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z%]`)

func TestCatalogComplete(t *testing.T) {
	t.Parallel()
	require.NotEmpty(t, Keys())
	for _, k := range Keys() {
		m, _ := Lookup(k)
		require.NotEmpty(t, m.EN, "%s has no English text", k)
		require.NotEmpty(t, m.ZH, "%s has no Chinese text", k)
		require.Equal(t, verb.FindAllString(m.EN, -1), verb.FindAllString(m.ZH, -1),
			"%s: placeholders differ between languages", k)
	}
}

func TestAcceptLanguage(t *testing.T) {
	t.Parallel()
	require.Equal(t, ZH, FromAcceptLanguage("zh-CN,zh;q=0.9,en;q=0.8"))
	require.Equal(t, ZH, FromAcceptLanguage("zh-Hans"))
	require.Equal(t, EN, FromAcceptLanguage("en-US,en;q=0.9"))
	require.Equal(t, EN, FromAcceptLanguage("fr-FR"))
	require.Equal(t, EN, FromAcceptLanguage(""))
	require.Equal(t, EN, FromAcceptLanguage(";;;garbage"))
}

func TestUnknownKeyIsVisible(t *testing.T) {
	t.Parallel()
	require.Equal(t, "[no.such.key]", T(EN, "no.such.key"))
}
