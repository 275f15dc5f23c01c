package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestBulkAssignSaysWhatItDid: an assignment answers with the table and a notice
// naming how many lines went to whom, in the singular for one line; one that
// changes nothing says so without the success colour.
func TestBulkAssignSaysWhatItDid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	ctx := context.Background()
	lines := b.allLines(t)
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	var bob *studio.Character
	for i := range chars {
		if chars[i].Name == "Bob" {
			bob = &chars[i]
		}
	}
	require.NotNil(t, bob)
	path := fmt.Sprintf("/projects/%d/lines/assign", b.project.ID)
	assign := func(charID string, ids ...int64) (string, bool) {
		form := url.Values{"character_id": {charID}}
		for _, id := range ids {
			form.Add("line_id", fmt.Sprint(id))
		}
		resp := c.htmx("POST", path, form)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		n := doc(t, resp).Find(`[data-testid=notice]`)
		return strings.TrimSpace(n.Text()), n.HasClass("ok")
	}
	// Lines 1 and 3 are Alice's: both go to Bob.
	msg, ok := assign(fmt.Sprint(bob.ID), lines[0].ID, lines[2].ID)
	require.Equal(t, "Assigned 2 lines to Bob.", msg)
	require.True(t, ok)
	msg, _ = assign(fmt.Sprint(bob.ID), lines[0].ID, lines[1].ID)
	require.Equal(t, "Nothing changed: the selected lines have that character already.", msg)
	msg, ok = assign("", lines[1].ID)
	require.Equal(t, "Removed the character from 1 line.", msg)
	require.True(t, ok)
}

// TestImportUpdatesTheCharactersButton: an import that creates characters sends the
// "Characters (N)" button again, out of band, with the new count.
func TestImportUpdatesTheCharactersButton(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	d := doc(t, c.get(fmt.Sprintf("/projects/%d", b.project.ID)))
	require.Equal(t, "Characters (2)", strings.TrimSpace(d.Find(`[data-testid=characters-link]`).Text()))

	srt := "1\n00:00:30,000 --> 00:00:31,000\nRENÉ: Déjà vu.\n\n2\n00:00:32,000 --> 00:00:33,000\nMARIE: Oui.\n"
	body, ct := importForm(t, "film.srt", []byte(srt), map[string]string{"preview": "0", "mode": "append"})
	resp := c.do("POST", fmt.Sprintf("/projects/%d/import", b.project.ID), body, ct, map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d = doc(t, resp)
	btn := d.Find(`#characters-link`)
	oob, _ := btn.Attr("hx-swap-oob")
	require.Equal(t, "true", oob)
	require.Equal(t, "Characters (4)", strings.TrimSpace(btn.Text()))

	// The page itself has it once, not out of band.
	d = doc(t, c.get(fmt.Sprintf("/projects/%d", b.project.ID)))
	require.Equal(t, 1, d.Find(`#characters-link`).Length())
	_, oobOnPage := d.Find(`#characters-link`).Attr("hx-swap-oob")
	require.False(t, oobOnPage)
}
