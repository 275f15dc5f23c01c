package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// needsReview marks take as the duration lock marks one too long for its slot: cut
// cutMs before its speech ended.
func needsReview(t *testing.T, b *testBundle, take *studio.Take, cutMs int) {
	t.Helper()
	studiotest.Exec(t, b.store, `UPDATE takes SET needs_review = true, cut_ms = $2, stretch_ratio = 1.25, needed_ratio = 1.4,
		hint = '{"key":"audio.fit.too_long","args":[12]}' WHERE id = $1`, take.ID, cutMs)
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'needs_review' WHERE id = $1`, take.LineID)
}

// TestApprovingATakeThatNeedsReviewAsksFirst: a take cut at its slot's end shows by
// how much, on its waveform too; its approve buttons (the review view's, the
// script row's a key, the takes list's) ask first, and the server approves it only
// with the answer.
func TestApprovingATakeThatNeedsReviewAsksFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	l := b.allLines(t)[0]
	take := takeWith(t, b, l, 72000, 0, 220)
	needsReview(t, b, take, 420)
	p := fmt.Sprintf("/projects/%d", b.project.ID)

	d := doc(t, c.get(fmt.Sprintf("%s/review?line=%d", p, l.ID)))
	card := d.Find(fmt.Sprintf(`#take-%d`, take.ID))
	require.Contains(t, card.Find(`[data-testid=review-over]`).Text(), "0.42 s over")
	require.Contains(t, card.Find(`[data-testid=wave-over]`).Text(), "+0.42 s cut", "the cut-off speech is drawn after the waveform")
	approve := card.Find(`[data-testid=review-approve]`)
	ask, _ := approve.Attr("hx-confirm")
	require.Equal(t, "Take 1 needs review (0.42 s over: cut at the slot's end with a short fade). Approve it anyway?", ask)
	vals, _ := approve.Attr("hx-vals")
	require.JSONEq(t, `{"confirm":"needs_review"}`, vals)

	// Without the answer nothing is approved.
	resp := c.htmx("POST", fmt.Sprintf("%s/review/takes/%d/approve", p, take.ID), url.Values{})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, readAll(t, resp), "confirm to approve")
	resp = c.htmx("POST", fmt.Sprintf("%s/lines/%d/approve", p, l.ID), url.Values{})
	require.Equal(t, http.StatusConflict, resp.StatusCode, "the script's a key asks too")
	resp = c.htmx("POST", fmt.Sprintf("%s/takes/%d/approve", p, take.ID), url.Values{})
	require.Equal(t, http.StatusConflict, resp.StatusCode, "and the takes list")
	got, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Nil(t, got.ApprovedTakeID)

	// The script row carries the question for its a key; the takes list asks it.
	d = doc(t, c.get(p))
	row := d.Find(fmt.Sprintf(`#line-%d`, l.ID))
	q, _ := row.Attr("data-approve-confirm")
	require.Equal(t, "The take of line 1 needs review (0.42 s over: cut at the slot's end with a short fade). Approve it anyway?", q)
	d = doc(t, c.htmx("GET", fmt.Sprintf("%s/lines/%d/takes", p, l.ID), nil))
	q, _ = d.Find(`[data-testid=approve-take]`).Attr("hx-confirm")
	require.Contains(t, q, "Approve it anyway?")

	// With it, the take is approved.
	resp = c.htmx("POST", fmt.Sprintf("%s/review/takes/%d/approve", p, take.ID), url.Values{"confirm": {"needs_review"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got, err = b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, take.ID, *got.ApprovedTakeID)
	d = doc(t, c.get(p))
	_, asks := d.Find(fmt.Sprintf(`#line-%d`, l.ID)).Attr("data-approve-confirm")
	require.False(t, asks, "an approved take is not asked about again")

	// A take that fits asks nothing.
	other := b.allLines(t)[1]
	fits := takeWith(t, b, other, 72000, 0, 330)
	d = doc(t, c.get(fmt.Sprintf("%s/review?line=%d", p, other.ID)))
	_, asks = d.Find(fmt.Sprintf(`#take-%d [data-testid=review-approve]`, fits.ID)).Attr("hx-confirm")
	require.False(t, asks)
	require.Zero(t, d.Find(`[data-testid=review-over], [data-testid=wave-over]`).Length())
	resp = c.htmx("POST", fmt.Sprintf("%s/lines/%d/approve", p, other.ID), url.Values{})
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// In Chinese too.
	zh := b.as(t, studio.RoleEditor)
	studiotest.Exec(t, b.store, `UPDATE users SET lang = 'zh' WHERE id = $1`, b.users[studio.RoleEditor].ID)
	d = doc(t, zh.get(fmt.Sprintf("%s/review?line=%d", p, l.ID)))
	require.Contains(t, d.Find(`[data-testid=review-over]`).Text(), "超出 0.42 s")
}

// TestRegenerateIsOffWhereItCannotDiffer: the newest take came from a deterministic
// engine and nothing it reads changed, so regenerate is off, with the reason, and the
// server refuses it; an edit of the line, or of its character, turns it back on.
func TestRegenerateIsOffWhereItCannotDiffer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	l := b.allLines(t)[0]
	take := takeWith(t, b, l, 72000, 0, 220)
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	review := fmt.Sprintf("%s/review?line=%d", p, l.ID)
	render := fmt.Sprintf("%s/review/lines/%d/render", p, l.ID)

	// Another engine's take: regenerate is offered (this server has no renderer).
	d := doc(t, c.get(review))
	_, off := d.Find(`[data-testid=review-regenerate]`).Attr("disabled")
	require.False(t, off)
	require.Equal(t, http.StatusServiceUnavailable, c.htmx("POST", render, url.Values{}).StatusCode)

	studiotest.Exec(t, b.store, `UPDATE takes SET engine = 'espeak', deterministic = true WHERE id = $1`, take.ID)
	d = doc(t, c.get(review))
	btn := d.Find(`[data-testid=review-regenerate]`)
	_, off = btn.Attr("disabled")
	require.True(t, off)
	require.Contains(t, d.Find(`[data-testid=regenerate-same]`).Text(), "espeak gives the same audio for the same text and voice")
	resp := c.htmx("POST", render, url.Values{})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, readAll(t, resp), "same audio")
	h, err := b.store.ReviewHistory(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Empty(t, h, "nothing was asked for")

	// The character's voice changed: a new take can differ.
	require.NotNil(t, l.CharacterID)
	ch, err := b.store.Character(ctx, b.project.ID, *l.CharacterID)
	require.NoError(t, err)
	require.NoError(t, b.store.UpdateCharacter(ctx, b.project.ID, ch.ID, studio.CharacterParams{Name: ch.Name, Color: ch.Color, Emotion: ch.Emotion, PreviewVoice: "en-gb-x-rp"}))
	d = doc(t, c.get(review))
	_, off = d.Find(`[data-testid=review-regenerate]`).Attr("disabled")
	require.False(t, off)
	require.Zero(t, d.Find(`[data-testid=regenerate-same]`).Length())

	// So can one after an edit of the text, whatever the character.
	studiotest.Exec(t, b.store, `UPDATE characters SET updated_at = now() - interval '1 hour' WHERE id = $1`, ch.ID)
	d = doc(t, c.get(review))
	require.Equal(t, 1, d.Find(`[data-testid=regenerate-same]`).Length())
	text := "Another text."
	_, err = b.store.UpdateLine(ctx, b.users[studio.RoleEditor].ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision, Text: &text})
	require.NoError(t, err)
	d = doc(t, c.get(review))
	require.Zero(t, d.Find(`[data-testid=regenerate-same]`).Length())
}
