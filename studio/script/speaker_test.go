package script

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpeakerRule keeps sentences with a colon whole (the cues a real French film lost
// words to) and still reads short capitalised, all-caps or CJK names.
func TestSpeakerRule(t *testing.T) {
	t.Parallel()
	tests := []struct{ line, character, text string }{
		{"Règle numéro un: on ne parle pas du club.", "", "Règle numéro un: on ne parle pas du club."},
		{"J'ai dit: pas maintenant.", "", "J'ai dit: pas maintenant."},
		{"Hide these tags: <b>bold</b>", "", "Hide these tags: bold"},
		{"Attention !: voilà", "", "Attention !: voilà"},
		{"Voilà.: fin", "", "Voilà.: fin"},
		{"The Very Long Name Here: hi", "", "The Very Long Name Here: hi"},
		{"ALICE:", "", "ALICE:"},
		{"ALICE: Hello.", "ALICE", "Hello."},
		{"Marie Curie: Bonjour.", "Marie Curie", "Bonjour."},
		{"小明：你好", "小明", "你好"},
		{"Narrator (V.O.): late", "Narrator (V.O.)", "late"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			t.Parallel()
			cues, err := ParseSRT([]byte("1\n00:00:01,000 --> 00:00:02,000\n" + tt.line + "\n"))
			require.NoError(t, err)
			require.Equal(t, tt.character, cues[0].Character)
			require.Equal(t, tt.text, cues[0].Text)
		})
	}
}
