package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestUploadLimitIsOnlyForMultipartBodies: the upload limit (2 GiB for a source) used
// to be chosen from the path alone, so an anonymous URL-encoded or JSON body sent to
// an upload route was read whole into memory before the CSRF check (a 300 MiB body to
// /source allocated 916 MiB). Only a multipart form gets the upload limit; any other
// body to any route stops at MAX_FORM_KB.
func TestUploadLimitIsOnlyForMultipartBodies(t *testing.T) {
	t.Parallel()
	h := setupHostile(t)
	handler := h.server.Config.Handler
	char := fmt.Sprintf("%s/characters/%d", h.project, h.char.ID)
	routes := []string{h.project + "/source", h.project + "/bed", h.project + "/import", char + "/reference", char + "/emotion-audio"}
	const huge = 16 << 20
	type bodyCase struct {
		contentType string
		length      int64 // -1: chunked, no announced length
	}
	cases := []bodyCase{
		{"application/x-www-form-urlencoded", huge}, {"application/x-www-form-urlencoded", -1},
		{"application/json", huge}, {"application/json", -1},
		{"application/octet-stream", huge},
	}
	for _, path := range routes {
		for _, bc := range cases {
			name := fmt.Sprintf("%s %s length %d", path, bc.contentType, bc.length)
			body := &countingBody{left: huge}
			req := httptest.NewRequest(http.MethodPost, path, body)
			req.ContentLength = bc.length
			req.Header.Set("Content-Type", bc.contentType)
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, name)
			require.Contains(t, rec.Body.String(), "1024 KiB", name+": the form limit's message")
			require.LessOrEqual(t, body.read.Load(), h.cfg.MaxFormBytes+64<<10, name)
		}
	}

	// A multipart body past MAX_FORM_KB but within MAX_UPLOAD_MB still reaches the
	// handler (which finds no file in these zeros).
	body := &countingBody{left: h.cfg.MaxFormBytes + 256<<10}
	req := httptest.NewRequest(http.MethodPost, char+"/reference", body)
	req.ContentLength = body.left
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	req.Header.Set("Cookie", h.c.cookie)
	for k, v := range h.htmxHeaders() {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
}

// TestUploadFieldsBeforeTheFileAreBounded: the short fields sent before a large
// upload's file are kept in memory; 200,000 of them held 222 MiB. Past 32 fields or
// 16 KiB in all the upload is refused with 400 and a message, storing nothing.
func TestUploadFieldsBeforeTheFileAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.SourceMaxUploadBytes = 16 << 20
	c := b.as(t, studio.RoleEditor)
	hx := map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf}
	path := fmt.Sprintf("/projects/%d/bed", b.project.ID)
	before := dataFiles(t, b)

	kinds := url.Values{"kind": make([]string, 33)}
	for i := range kinds["kind"] {
		kinds["kind"][i] = "me"
	}
	long := url.Values{"kind": {"me"}}
	for i := range 20 {
		long.Set(fmt.Sprintf("note%d", i), strings.Repeat("n", 1000))
	}
	for name, fields := range map[string]url.Values{"33 fields": kinds, "20 KB of fields": long} {
		body, ct := fileUpload(t, "file", "bed.wav", []byte("not audio"), fields)
		resp := c.do("POST", path, body, ct, hx)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
		msg := doc(t, resp).Find(`[data-testid=bed-error]`).Text()
		require.Contains(t, msg, "at most 32 fields", name)
		require.Contains(t, msg, "16 KiB", name)
	}
	require.Equal(t, before, dataFiles(t, b), "nothing spooled")
}

// TestBulkFormsBoundTheirLines: every line_id of a bulk form is one bind parameter
// of the store's queries, and PostgreSQL takes 65,535 in a statement; the review
// found 70,000 ids (700 KB, under MAX_FORM_KB) a 500. Go now refuses such a form whole
// (net/url's 10,000 fields, a GODEBUG setting), which reached the handler empty and
// was answered "Select at least one line.". Such a form is refused with 400 and a
// message saying why; repeated ids count once, and more than 5,000 lines are refused
// with 422 and a message whatever Go's own limit.
func TestBulkFormsBoundTheirLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	hx := map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf}
	l, _ := firstLine(t, b)
	assign := fmt.Sprintf("/projects/%d/lines/assign", b.project.ID)
	ids := func(n int64) string {
		var form strings.Builder
		for i := range n {
			fmt.Fprintf(&form, "line_id=%d&", l.ID+i)
		}
		form.WriteString("character_id=")
		require.Less(t, int64(form.Len()), b.cfg.MaxFormBytes, "under the form limit")
		return form.String()
	}
	post := func(form string) *http.Response {
		return c.do("POST", assign, strings.NewReader(form), "application/x-www-form-urlencoded", hx)
	}

	resp := post(ids(70_000))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, doc(t, resp).Text(), "more fields than the server reads")

	resp = post(ids(6_000))
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Text(), "Too many lines are selected (6000): select at most 5000 at once.")

	resp = post(strings.Repeat(fmt.Sprintf("line_id=%d&", l.ID), 9_000) + "character_id=")
	require.Equal(t, http.StatusOK, resp.StatusCode, "one line, sent 9,000 times")
	got, err := b.store.Line(context.Background(), b.project.ID, l.ID)
	require.NoError(t, err)
	require.Nil(t, got.CharacterID)
}

// TestEmotionWeightIsCheckedBeforeTheUpload: the emotion upload's weight used to be
// checked only after the recording was probed and stored (a blob left behind), and
// one that did not parse became 0.8 without a word. It is checked first, with the
// character form's message, and a refused one stores nothing.
func TestEmotionWeightIsCheckedBeforeTheUpload(t *testing.T) {
	t.Parallel()
	h := setupHostile(t)
	ctx := context.Background()
	wav := sourceFile(t, "voice.wav", "-f", "lavfi", "-i", "sine=frequency=220:sample_rate=24000:duration=4")
	path := fmt.Sprintf("%s/characters/%d/emotion-audio", h.project, h.char.ID)
	sums, files := dbChecksums(t, h.testBundle), dataFiles(t, h.testBundle)
	for _, w := range []string{"abc", "", "1.5", "-0.1", "NaN", "0,5"} {
		body, ct := fileUpload(t, "emotion_file", "angry.wav", wav, url.Values{"emotion_weight": {w}})
		resp := h.c.do("POST", path, body, ct, h.htmxHeaders())
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, w)
		require.Equal(t, "The emotion weight is a number from 0 to 1.", doc(t, resp).Find(`[data-testid=field-error]`).Text(), w)
	}
	require.Equal(t, sums, dbChecksums(t, h.testBundle), "nothing saved")
	require.Equal(t, files, dataFiles(t, h.testBundle), "nothing stored")

	body, ct := fileUpload(t, "emotion_file", "angry.wav", wav, url.Values{"emotion_weight": {"0.5"}})
	resp := h.c.do("POST", path, body, ct, h.htmxHeaders())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ch, err := h.store.Character(ctx, h.testBundle.project.ID, h.char.ID)
	require.NoError(t, err)
	require.Equal(t, studio.EmotionAudio, ch.Emotion.Mode)
	require.InDelta(t, 0.5, ch.Emotion.Weight, 1e-9)
}
