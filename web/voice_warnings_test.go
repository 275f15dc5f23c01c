package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// TestCharacterCardShowsVoiceWarnings: what the checks of a reference voice found
// (media.CheckVoice) is on the character's card, with its figures, in the editor's
// language; a voice without a finding has no warning.
func TestCharacterCardShowsVoiceWarnings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	ref := studiotest.Take(t, b.store, studio.BlobStore{Dir: t.TempDir()}, t.TempDir(), b.allLines(t)[0], 48000, 0, 440).AudioSHA256
	require.NoError(t, b.store.SetCheckedCharacterReference(ctx, b.project.ID, chars[0].ID, ref, "loud.wav",
		[]studio.VoiceWarning{{Key: "voice.clipped", Args: []string{"2.5"}}, {Key: "voice.noisy", Args: []string{"-31", "12"}}}))
	require.NoError(t, b.store.SetCharacterReference(ctx, b.project.ID, chars[1].ID, ref, "fine.wav"))

	editor := b.as(t, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d/characters", b.project.ID)
	resp := editor.get(path)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	card := d.Find(fmt.Sprintf("#character-%d", chars[0].ID))
	require.Equal(t, 2, card.Find(`[data-testid="voice-warning"]`).Length())
	require.Contains(t, card.Find(`[data-key="voice.clipped"]`).Text(), "2.5% of its samples are clipped")
	require.Contains(t, card.Find(`[data-key="voice.noisy"]`).Text(), "-31 dBFS")
	require.Zero(t, d.Find(fmt.Sprintf("#character-%d [data-testid=\"voice-warnings\"]", chars[1].ID)).Length())

	zh := doc(t, editor.do("GET", path, nil, "", map[string]string{"Accept-Language": "zh-CN"}))
	require.Contains(t, zh.Find(fmt.Sprintf("#character-%d [data-key=\"voice.clipped\"]", chars[0].ID)).Text(), "削波")
}
