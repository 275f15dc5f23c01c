package tts

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestApplyGlossary(t *testing.T) {
	t.Parallel()
	g := []GlossaryEntry{
		{Term: "Ann", Spoken: "Anne"},
		{Term: "NASA", Spoken: "nasa"},
		{Term: "NASA JPL", Spoken: "nasa jay pee ell"},
		{Term: "重庆", Spoken: "崇庆"},
		{Term: "C++", Spoken: "C plus plus"}, //nolint:dupword // how it is said
	}
	for _, tc := range []struct{ in, want string }{
		{"Ann and Anna met.", "Anne and Anna met."},
		{"NASA JPL called NASA.", "nasa jay pee ell called nasa."},
		{"Ann's car", "Anne's car"},
		{"Joann", "Joann"},
		{"我在重庆。", "我在崇庆。"},
		{"重庆重庆", "崇庆崇庆"},
		{"I like C++.", "I like C plus plus."},
		{"nasa", "nasa"},
		{"", ""},
	} {
		require.Equal(t, tc.want, ApplyGlossary(tc.in, g), tc.in)
	}
	require.Equal(t, "same", ApplyGlossary("same", nil))
}

func FuzzApplyGlossary(f *testing.F) {
	f.Add("Ann met NASA in 重庆", "Ann", "Anne")
	f.Fuzz(func(t *testing.T, text, term, spoken string) {
		out := ApplyGlossary(text, []GlossaryEntry{{Term: term, Spoken: spoken}})
		if term == "" || spoken == term {
			require.Equal(t, text, out)
		}
	})
}
