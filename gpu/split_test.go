package gpu

import (
	"strings"
	"testing"

	"dubstudio/i18n"

	"github.com/stretchr/testify/require"
)

// perChar estimates one second per non-space character.
func perChar(s string) float64 { return float64(countChars(s)) }

func TestSplitText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		max  float64
		want []string
	}{
		{"fits whole", "Hello there. Bye.", 100, []string{"Hello there. Bye."}},
		{"sentences packed", "Aaa bb. Cc dd! Ee ff? Gg.", 10,
			[]string{"Aaa bb.", "Cc dd! Ee ff?", "Gg."}},
		{"decimal point is not an end", "It costs 3.5 euros. Ok.", 17, []string{"It costs 3.5 euros.", "Ok."}},
		{"closing quote stays", `He said "go." Then left.`, 12, []string{`He said "go."`, "Then left."}},
		{"ellipsis and ?!", "Wait... What?! No.", 9, []string{"Wait...", "What?! No."}},
		{"chinese", "你好。今天天气很好！我们走吧？好。", 8, []string{"你好。", "今天天气很好！", "我们走吧？好。"}},
		{"chinese with closer", "他说：“走。”然后离开了。", 8, []string{"他说：“走。”", "然后离开了。"}},
		{"semicolon fallback", "One two three; four five six; seven. Eight.", 14,
			[]string{"One two three;", "four five six;", "seven. Eight."}},
		{"full-width semicolon", "一二三四五；六七八九十。", 6, []string{"一二三四五；", "六七八九十。"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := SplitText(tt.text, tt.max, perChar)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			for _, p := range got {
				require.LessOrEqual(t, perChar(p), tt.max)
			}
			// Nothing is lost or reordered.
			require.Equal(t, strings.Join(strings.Fields(tt.text), ""),
				strings.Join(strings.Fields(strings.Join(got, "")), ""))
		})
	}
}

func TestSplitTextRefusesALongSentence(t *testing.T) {
	t.Parallel()
	text := "Short. This sentence has no place to cut at all and goes on. End."
	_, err := SplitText(text, 20, perChar)
	require.ErrorIs(t, err, ErrInvalid)
	var se *SplitError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "This sentence has no place to cut at all and goes on.", se.Sentence)
	require.InDelta(t, 42.0, se.Seconds, 1e-9)
	require.InDelta(t, 20.0, se.LimitSeconds, 1e-9)
	require.Contains(t, se.In(i18n.EN), "about 42 s, the limit is 20 s")
	require.Contains(t, se.In(i18n.ZH), "约 42 秒，上限为 20 秒")
	require.NotContains(t, se.In(i18n.ZH), "%!")
}

func TestProportionalEstimate(t *testing.T) {
	t.Parallel()
	text := "Aaaa bbbb. Cccc dddd."
	est := ProportionalEstimate(text, 36) // 18 characters, 2 s each
	require.InDelta(t, 18.0, est("Aaaa bbbb."), 1e-9)
	parts, err := SplitText(text, 20, est)
	require.NoError(t, err)
	require.Equal(t, []string{"Aaaa bbbb.", "Cccc dddd."}, parts)
	require.Zero(t, ProportionalEstimate("", 10)("x"))
}
