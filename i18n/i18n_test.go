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
		if m.One != "" {
			require.Equal(t, verb.FindAllString(m.EN, -1), verb.FindAllString(m.One, -1),
				"%s: placeholders differ between the singular and the plural", k)
		}
	}
}

// TestCountsArePlural: a count of 1 takes the singular in English, wherever the
// count is among the arguments, and whatever number type carries it; Chinese has one
// form.
func TestCountsArePlural(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Nothing was imported from a.srt: 1 problem.", T(EN, "import.refused", "a.srt", 1))
	require.Equal(t, "Nothing was imported from a.srt: 2 problems.", T(EN, "import.refused", "a.srt", 2))
	require.Equal(t, "Nothing was imported from a.srt: 0 problems.", T(EN, "import.refused", "a.srt", 0))
	require.Equal(t, "Queued 1 line.", T(EN, "render.queued", 1))
	require.Equal(t, "Logins paused from 1 address", T(EN, "users.throttled", float64(1)), "a count read back from JSON")
	require.Equal(t, "1 attempt", T(EN, "line.attempts", int64(1)))
	require.Equal(t, "Page 1 of 1 (1 line)", T(EN, "pager.page", 1, 1, 1))
	require.Equal(t, "Page 1 of 2 (30 lines)", T(EN, "pager.page", 1, 2, 30), "the count is the third argument")
	require.Equal(t, "已加入队列 1 句。", T(ZH, "render.queued", 1))
	// Every message whose English says "%d <plural noun>" has its singular.
	plural := regexp.MustCompile(`%d (more |previous )?(lines|problems|cues|takes|attempts|runs|minutes|times)\b`)
	for _, k := range Keys() {
		m, _ := Lookup(k)
		if plural.MatchString(m.EN) {
			require.NotEmpty(t, m.One, "%s counts %q without a singular", k, m.EN)
		}
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
