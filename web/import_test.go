package web_test

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/charmap"

	"dubstudio/studio"
)

// importForm is the import form's body: the file and the other fields.
func importForm(t testing.TB, name string, data []byte, fields map[string]string) (io.Reader, string) {
	var buf strings.Builder
	w := multipart.NewWriter(&buf)
	fw, err := w.CreateFormFile("file", name)
	require.NoError(t, err)
	_, err = fw.Write(data)
	require.NoError(t, err)
	for k, v := range fields {
		require.NoError(t, w.WriteField(k, v))
	}
	require.NoError(t, w.Close())
	return strings.NewReader(buf.String()), w.FormDataContentType()
}

func TestImportPreviewThenConfirm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	ctx := context.Background()
	path := fmt.Sprintf("/projects/%d/import", b.project.ID)
	hdr := map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf}
	before, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)

	text := "1\r\n00:00:30,000 --> 00:00:31,000\r\nRENÉ: Déjà vu, garçon!\r\n\r\n" +
		"2\r\n00:00:32,000 --> 00:00:33,000\r\n- Oui.\r\n- Non.\r\n"
	latin, err := charmap.Windows1252.NewEncoder().String(text)
	require.NoError(t, err)

	// Preview: detected encoding, rows, flags, new characters; nothing written.
	body, ct := importForm(t, "film.srt", []byte(latin), map[string]string{"preview": "1", "mode": "append"})
	resp := c.do("POST", path, body, ct, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	require.Contains(t, d.Find(`[data-testid=import-read-as]`).Text(), "windows-1252")
	rows := d.Find(`[data-testid=import-row]`)
	require.Equal(t, 2, rows.Length())
	require.Equal(t, "RENÉ", strings.TrimSpace(rows.First().Find(`[data-testid=import-row-character]`).Text()))
	require.Contains(t, rows.First().Find(`[data-testid=import-row-text]`).Text(), "Déjà vu, garçon!")
	require.Equal(t, 1, d.Find(`[data-testid=import-flag-dialogue]`).Length())
	require.Contains(t, d.Find(`[data-testid=import-new-characters]`).Text(), "RENÉ")
	sum, ok := d.Find(`input[name=sha256]`).Attr("value")
	require.True(t, ok)
	after, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, before, after, "a preview writes nothing")

	// The encoding override reads the same bytes otherwise.
	body, ct = importForm(t, "film.srt", []byte(latin), map[string]string{"preview": "1", "encoding": "iso-8859-15"})
	d = doc(t, c.do("POST", path, body, ct, hdr))
	require.Contains(t, d.Find(`[data-testid=import-read-as]`).Text(), "iso-8859-15")

	// A confirm with other bytes than those previewed is previewed again.
	body, ct = importForm(t, "film.srt", []byte(text), map[string]string{"preview": "0", "sha256": sum})
	resp = c.do("POST", path, body, ct, hdr)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, doc(t, resp).Text(), "changed since it was previewed")
	after, err = b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, before, after)

	// The confirm imports what was previewed.
	body, ct = importForm(t, "film.srt", []byte(latin), map[string]string{"preview": "0", "sha256": sum, "mode": "append"})
	resp = c.do("POST", path, body, ct, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=import-ok]`).Text(), "Imported 2 lines")
	after, err = b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	require.Len(t, after, len(before)+2)
	require.Equal(t, "Déjà vu, garçon!", after[len(after)-2].Text)

	// An unknown mode is refused.
	body, ct = importForm(t, "film.srt", []byte(latin), map[string]string{"mode": "overwrite"})
	resp = c.do("POST", path, body, ct, hdr)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
}
