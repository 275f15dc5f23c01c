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

// TestNumbersThatAreNotFiniteAreRefused: Go reads "NaN", "Inf" and "infinity" as
// numbers, and NaN passes every range check (each comparison is false). A fit setting
// sent as NaN was saved (every later fit of the project read it), and an emotion
// vector or weight of NaN reached the database's JSON encoder: a 500. Each is now
// refused in its form with the field's message, keeping what was typed, and nothing
// changes.
func TestNumbersThatAreNotFiniteAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	base := fmt.Sprintf("/projects/%d", b.project.ID)
	before, err := b.store.Project(ctx, b.project.ID)
	require.NoError(t, err)

	for _, bad := range []string{"NaN", "nan", "Inf", "-infinity"} {
		resp := c.post(base+"/fit", url.Values{"stretch_min": {"0.9"}, "stretch_max": {"1.2"}, "gap_borrow_ms": {"200"},
			"loudness_lufs": {bad}, "max_speed_step": {"0.1"}}, true)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, bad)
		d := doc(t, resp)
		require.Contains(t, d.Find(`[data-testid=fit-form] [data-testid=field-error]`).Text(), "Enter a number.", bad)
		v, _ := d.Find(`input[name=loudness_lufs]`).Attr("value")
		require.Equal(t, bad, v, "what was typed is kept")
	}
	after, err := b.store.Project(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, before.FitSettings(), after.FitSettings(), "nothing saved")

	// A line's emotion: a vector, or the source emotion's weight.
	l, path := firstLine(t, b)
	for _, tc := range []struct{ mode, value, msg string }{
		{"vector", "NaN,0,0,0,0,0,0,0", "An emotion vector is 8 numbers from 0 to 1"},
		{"vector", "0.1,0,0,0,0,0,0,Inf", "An emotion vector is 8 numbers from 0 to 1"},
		{"source:0-1000:NaN", "", "The emotion weight is a number from 0 to 1."},
	} {
		form := lineEdit(l, "Changed text", l.Revision)
		form.Set("emotion_mode", tc.mode)
		form.Set("emotion_value", tc.value)
		resp := c.htmx("POST", path, form)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, tc.mode+" "+tc.value)
		d := doc(t, resp)
		require.Contains(t, d.Find(`[data-testid=field-error]`).Text(), tc.msg)
		require.Equal(t, "Changed text", d.Find(`textarea[name=text]`).Text(), "what was typed is kept")
	}
	cur, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, l.Revision, cur.Revision, "nothing saved")

	// A character's emotion weight, where its emotion is a recording.
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	ch := chars[0]
	studiotest.Exec(t, b.store, `UPDATE characters SET emotion = '{"mode":"audio","audio_sha256":"`+
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"+`","weight":0.5}' WHERE id = $1`, ch.ID)
	resp := c.htmx("POST", fmt.Sprintf("%s/characters/%d", base, ch.ID), url.Values{"name": {ch.Name}, "color": {ch.Color},
		"preview_voice": {ch.PreviewVoice}, "emotion_mode": {"audio"}, "emotion_weight": {"NaN"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=field-error]`).Text(), "The emotion weight is a number from 0 to 1.")
	got, err := b.store.Character(ctx, b.project.ID, ch.ID)
	require.NoError(t, err)
	require.InDelta(t, 0.5, got.Emotion.Weight, 1e-9, "nothing saved")
}
