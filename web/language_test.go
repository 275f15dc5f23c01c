package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

func TestProjectLanguageGivesNewCharactersItsVoice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	p := fmt.Sprintf("/projects/%d", b.project.ID)

	card := doc(t, c.htmx("GET", p+"/language", nil))
	require.Empty(t, card.Find(`[data-testid=project-language] option[selected]`).AttrOr("value", "x"), "none set")
	require.Equal(t, "French (fr)", card.Find(`[data-testid=project-language] option[value=fr]`).Text(), "language names, not raw codes")

	// An unknown language is refused and changes nothing.
	resp := c.htmx("POST", p+"/language", url.Values{"language": {"klingon"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Text(), "Choose a language from the list.")
	lang, err := b.store.ProjectLanguage(ctx, b.project.ID)
	require.NoError(t, err)
	require.Empty(t, lang)

	resp = c.htmx("POST", p+"/language", url.Values{"language": {"fr"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	card = doc(t, resp)
	require.Equal(t, 1, card.Find(`[data-testid=language-saved]`).Length())
	require.Equal(t, "fr", card.Find(`[data-testid=project-language] option[selected]`).AttrOr("value", ""))

	// The new-character form starts with the language's voice, named.
	page := doc(t, c.get(p+"/characters"))
	sel := page.Find(`[data-testid=new-character] select[name=preview_voice] option[selected]`)
	require.Equal(t, "fr", sel.AttrOr("value", ""))
	require.Equal(t, "French (fr)", sel.Text())

	// Characters an import creates get it too, whatever the text looks like.
	_, err = b.store.ImportLines(ctx, b.users[studio.RoleEditor].ID, b.project.ID,
		[]studio.NewLine{{SourceLine: 1, StartMs: 90000, EndMs: 91000, CharacterName: "Zoé", Text: "Bonjour."}})
	require.NoError(t, err)
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	found := false
	for _, ch := range chars {
		if ch.Name == "Zoé" {
			found = true
			require.Equal(t, "fr", ch.PreviewVoice)
		}
	}
	require.True(t, found)
}
