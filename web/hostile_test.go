package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/web"
)

// hostileDir is the corpus of hostile inputs, at the repository's root (see its
// README.md).
const hostileDir = "../testdata/hostile"

// hostileTables are the tables a hostile request could disturb; dbChecksums reads a
// checksum of each, so that a refused request can be shown to have changed nothing.
var hostileTables = []string{"projects", "lines", "line_history", "characters", "blobs", "takes", "glossary", "users"}

func dbChecksums(t *testing.T, b *testBundle) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range hostileTables {
		var sum string
		err := b.store.Pool().QueryRow(context.Background(), fmt.Sprintf(
			`SELECT count(*) || ':' || md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM %s x`, table)).Scan(&sum)
		require.NoError(t, err, table)
		out[table] = sum
	}
	return out
}

// dataFiles lists the files under the data directory (blobs and temporary files).
func dataFiles(t *testing.T, b *testBundle) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(b.cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

func corpus(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(hostileDir, name))
	require.NoError(t, err)
	return data
}

// fileUpload is a multipart body with one file; the file name is written into the
// part header as given, byte for byte (NUL bytes and backslashes included), as a
// hostile client would.
// multipartFields is a multipart form of fields only, no file.
func multipartFields(t *testing.T, fields url.Values) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, vs := range fields {
		for _, v := range vs {
			require.NoError(t, w.WriteField(k, v))
		}
	}
	require.NoError(t, w.Close())
	return &buf, w.FormDataContentType()
}

func fileUpload(t *testing.T, field, name string, data []byte, extra url.Values) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, vs := range extra {
		for _, v := range vs {
			require.NoError(t, w.WriteField(k, v))
		}
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, field, strings.ReplaceAll(name, `"`, `\"`)))
	h.Set("Content-Type", "application/octet-stream")
	fw, err := w.CreatePart(h)
	require.NoError(t, err)
	_, err = fw.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return &buf, w.FormDataContentType()
}

// hostileBundle is a project with a line and a character to aim at, and the pieces
// of the requests.
type hostileBundle struct {
	*testBundle
	c        *client
	project  string
	line     studio.Line
	char     studio.Character
	otherChr studio.Character
}

func setupHostile(t *testing.T) *hostileBundle {
	t.Helper()
	b := setup(t)
	ctx := context.Background()
	page, err := b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	// A character of another project, which this project's lines must not take.
	other := studiotest.Project(t, b.store, b.users[studio.RoleEditor], 2)
	otherChars, err := b.store.Characters(ctx, other.ID)
	require.NoError(t, err)
	return &hostileBundle{testBundle: b, c: b.as(t, studio.RoleEditor), project: fmt.Sprintf("/projects/%d", b.project.ID),
		line: page.Lines[0], char: chars[0], otherChr: otherChars[0]}
}

func (h *hostileBundle) htmxHeaders() map[string]string {
	return map[string]string{"HX-Request": "true", "X-CSRF-Token": h.c.csrf}
}

func (h *hostileBundle) importFile(t *testing.T, name string, data []byte) *http.Response {
	body, ct := fileUpload(t, "file", name, data, nil)
	return h.c.do("POST", h.project+"/import", body, ct, h.htmxHeaders())
}

func (h *hostileBundle) upload(t *testing.T, field, name string, data []byte) *http.Response {
	path := fmt.Sprintf("%s/characters/%d/reference", h.project, h.char.ID)
	if field == "emotion_file" {
		path = fmt.Sprintf("%s/characters/%d/emotion-audio", h.project, h.char.ID)
	}
	body, ct := fileUpload(t, field, name, data, nil)
	return h.c.do("POST", path, body, ct, h.htmxHeaders())
}

// lineForm is the inline edit form of the line as the editor page fills it in.
func (h *hostileBundle) lineForm() url.Values {
	return url.Values{"text": {h.line.Text}, "notes": {""}, "base_revision": {fmt.Sprint(h.line.Revision)},
		"start": {"00:00:00.000"}, "end": {"00:00:01.500"}, "duration_lock": {"1"},
		"character_id": {fmt.Sprint(*h.line.CharacterID)}}
}

func (h *hostileBundle) editLine(form url.Values) *http.Response {
	return h.c.htmx("POST", fmt.Sprintf("%s/lines/%d", h.project, h.line.ID), form)
}

func (h *hostileBundle) characterForm(name string) url.Values {
	return url.Values{"name": {name}, "color": {"#336699"}, "preview_voice": {"en"}, "emotion_mode": {"speaker"}}
}

// TestHostileInputIsRefusedAndChangesNothing posts each hostile input of the corpus
// through the real handlers. Each is refused with a status and a message a user can
// act on, and leaves the database and the data directory as they were.
func TestHostileInputIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	h := setupHostile(t)
	bigAudio := make([]byte, 2<<20) // the upload limit is 1 MB in these tests
	copy(bigAudio, corpus(t, "audio/truncated.wav"))
	var tooManyCues strings.Builder
	for i := range 20001 {
		fmt.Fprintf(&tooManyCues, "%d\n00:00:%02d,000 --> 00:00:%02d,500\nCue %d\n\n", i+1, i%60, i%60, i+1)
	}

	type hostileCase struct {
		name   string
		send   func(t *testing.T) *http.Response
		status int
		// msg is (part of) the message shown, in English.
		msg string
	}
	importCase := func(file string, status int, msg string) hostileCase {
		return hostileCase{"import " + file, func(t *testing.T) *http.Response {
			return h.importFile(t, filepath.Base(file), corpus(t, "subtitles/"+file))
		}, status, msg}
	}
	uploadCase := func(field, file string, status int, msg string) hostileCase {
		return hostileCase{field + " " + file, func(t *testing.T) *http.Response {
			return h.upload(t, field, filepath.Base(file), corpus(t, "audio/"+file))
		}, status, msg}
	}
	editCase := func(name string, change func(url.Values), status int, msg string) hostileCase {
		return hostileCase{"line edit: " + name, func(*testing.T) *http.Response {
			f := h.lineForm()
			change(f)
			return h.editLine(f)
		}, status, msg}
	}
	const (
		notAudio  = "This file is not audio that can be read"
		notText   = "This is not a text file"
		truncated = "This audio file is incomplete"
		empty     = "The file is empty"
		badText   = "Text must be valid and at most"
		badName   = "A project needs a name of at most 200 characters"
		badChar   = "A character needs a name of at most 100 characters"
		badChars  = "A name cannot contain control characters or invalid text"
		noSound   = "This file has no sound track"
	)
	cases := []hostileCase{
		importCase("bad_timecodes.srt", 422, "6"),
		importCase("backwards.srt", 422, "2"),
		importCase("truncated_cue.srt", 422, "6"),
		importCase("overlong_timecode.srt", 422, "2"),
		importCase("999h_timecode.srt", 422, "2"),
		importCase("three_hour_cue.srt", 422, "This line lasts 10800 s; a line may last at most 60 s (setting MAX_LINE_SECONDS)"),
		importCase("empty.srt", 422, empty),
		importCase("whitespace_only.srt", 422, empty),
		importCase("bom_only.srt", 422, empty),
		importCase("binary.srt", 422, notText),
		// Legacy encodings are detected and imported (below); a wrong choice of the
		// user's is refused with the line of each bad byte.
		{"import GBK read as UTF-8 by choice", func(t *testing.T) *http.Response {
			body, ct := fileUpload(t, "file", "gbk.srt", corpus(t, "subtitles/gbk.srt"), url.Values{"encoding": {"utf-8"}})
			return h.c.do("POST", h.project+"/import", body, ct, h.htmxHeaders())
		}, 422, "line 3: Invalid UTF-8"},
		{"import with an unknown encoding", func(t *testing.T) *http.Response {
			body, ct := fileUpload(t, "file", "gbk.srt", corpus(t, "subtitles/gbk.srt"), url.Values{"encoding": {"ebcdic"}})
			return h.c.do("POST", h.project+"/import", body, ct, h.htmxHeaders())
		}, 422, `Unknown encoding "ebcdic"`},
		importCase("control_chars.srt", 422, "Control character U+001B is not allowed"),
		importCase("nul_in_text.srt", 422, notText),
		importCase("huge_cue.srt", 422, "the limit is 2000"),
		importCase("unbalanced_quote.csv", 422, "never closed"),
		importCase("missing_columns.csv", 422, "column"),
		{"import a script of more than 20,000 cues", func(t *testing.T) *http.Response {
			return h.importFile(t, "many.srt", []byte(tooManyCues.String()))
		}, 422, "20000"},
		{"import without a file", func(t *testing.T) *http.Response {
			return h.c.do("POST", h.project+"/import", strings.NewReader(""), "multipart/form-data; boundary=x", h.htmxHeaders())
		}, 422, "file"},
		{"import with a path for a name", func(t *testing.T) *http.Response {
			return h.importFile(t, "../../etc/passwd", corpus(t, "subtitles/bad_timecodes.srt"))
		}, 422, "passwd"},
		{"import with a Windows path for a name", func(t *testing.T) *http.Response {
			return h.importFile(t, `C:\x\..\evil.srt`, corpus(t, "subtitles/binary.srt"))
		}, 422, "evil.srt"},
		{"import with a NUL byte in the name", func(t *testing.T) *http.Response {
			// The part's header cannot be parsed: it is no file at all.
			return h.importFile(t, "evil\x00.srt", corpus(t, "subtitles/binary.srt"))
		}, 422, "Choose a file to import"},

		uploadCase("file", "text_as.wav", 422, notAudio),
		uploadCase("file", "empty.wav", 422, empty),
		uploadCase("file", "truncated.wav", 422, truncated),
		uploadCase("file", "header_only.wav", 422, noSound),
		uploadCase("file", "png_as.wav", 422, noSound),
		uploadCase("file", "html_as.mp3", 422, notAudio),
		uploadCase("file", "zip_as.ogg", 422, notAudio),
		uploadCase("file", "garbage.mp3", 422, notAudio),
		uploadCase("file", "video_no_audio.mp4", 422, noSound),
		uploadCase("file", "aac_audio.m4a", 422, "WAV"),
		uploadCase("emotion_file", "truncated.wav", 422, truncated),
		uploadCase("emotion_file", "html_as.mp3", 422, notAudio),
		{"reference over the size limit", func(t *testing.T) *http.Response {
			return h.upload(t, "file", "huge.wav", bigAudio)
		}, 413, "1 MB"},
		{"reference with a path for a name", func(t *testing.T) *http.Response {
			return h.upload(t, "file", "../../etc/passwd", corpus(t, "audio/text_as.wav"))
		}, 422, notAudio},
		{"reference with a NUL byte in the name", func(t *testing.T) *http.Response {
			return h.upload(t, "file", "voice\x00.wav", corpus(t, "audio/png_as.wav"))
		}, 422, "Choose a file to upload"},

		editCase("NUL byte in the text", func(f url.Values) { f.Set("text", "Before\x00after") }, 400, "UTF-8"),
		editCase("escape sequence in the text", func(f url.Values) { f.Set("text", "Red \x1b[31malert") }, 422, "control characters"),
		editCase("invalid UTF-8 in the text", func(f url.Values) { f.Set("text", "Caf\xe9") }, 400, "UTF-8"),
		editCase("huge text", func(f url.Values) { f.Set("text", strings.Repeat("long ", 2000)) }, 422, badText),
		editCase("NUL byte in the notes", func(f url.Values) { f.Set("notes", "a\x00b") }, 400, "UTF-8"),
		editCase("a revision that is not a number", func(f url.Values) { f.Set("base_revision", "1 OR 1=1") }, 400, "request"),
		editCase("a revision from the future", func(f url.Values) { f.Set("base_revision", "99999") }, 409, ""),
		editCase("a timecode that is not one", func(f url.Values) { f.Set("start", "'; DROP TABLE lines; --") }, 422, "time"),
		editCase("an end before the start", func(f url.Values) { f.Set("end", "00:00:00.000"); f.Set("start", "00:00:01.000") }, 422, ""),
		editCase("an absurd timecode", func(f url.Values) { f.Set("end", "99999999:00:00.000") }, 422, ""),
		editCase("another project's character", func(f url.Values) { f.Set("character_id", fmt.Sprint(h.otherChr.ID)) }, 422, ""),
		editCase("a bad emotion vector", func(f url.Values) {
			f.Set("emotion_mode", "vector")
			f.Set("emotion_value", "1,2,3,<script>")
		}, 422, ""),

		{"project named with spaces only", func(*testing.T) *http.Response {
			return h.c.htmx("POST", "/projects", url.Values{"name": {"   "}})
		}, 422, badName},
		{"project with a huge name", func(*testing.T) *http.Response {
			return h.c.htmx("POST", "/projects", url.Values{"name": {strings.Repeat("x", 201)}})
		}, 422, badName},
		{"project with a NUL byte in its name", func(*testing.T) *http.Response {
			return h.c.htmx("POST", "/projects", url.Values{"name": {"evil\x00project"}})
		}, 400, "UTF-8"},
		{"project with invalid UTF-8 in its name", func(*testing.T) *http.Response {
			return h.c.htmx("POST", "/projects", url.Values{"name": {"Caf\xe9"}})
		}, 400, "UTF-8"},
		{"project renamed with control characters", func(*testing.T) *http.Response {
			return h.c.htmx("POST", h.project+"/rename", url.Values{"name": {"bell\x07"}})
		}, 422, badChars},
		{"character with a NUL byte in its name", func(*testing.T) *http.Response {
			return h.c.htmx("POST", h.project+"/characters", h.characterForm("Eve\x00"))
		}, 400, "UTF-8"},
		{"character with invalid UTF-8 in its name", func(*testing.T) *http.Response {
			return h.c.htmx("POST", h.project+"/characters", h.characterForm("\xff\xfe"))
		}, 400, "UTF-8"},
		{"character with a huge name", func(*testing.T) *http.Response {
			return h.c.htmx("POST", h.project+"/characters", h.characterForm(strings.Repeat("é", 101)))
		}, 422, badChar},
		{"character renamed to nothing", func(*testing.T) *http.Response {
			return h.c.htmx("POST", fmt.Sprintf("%s/characters/%d", h.project, h.char.ID), h.characterForm(" \t "))
		}, 422, badChar},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, files := dbChecksums(t, h.testBundle), dataFiles(t, h.testBundle)
			resp := tc.send(t)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, "%s", body)
			d, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
			require.NoError(t, err)
			text := strings.Join(strings.Fields(d.Text()), " ")
			require.NotEmpty(t, text, "an error the user can read")
			require.Contains(t, text, tc.msg)
			require.NotContains(t, text, "../", "a client's path is never shown")
			require.NotContains(t, text, "/tmp/", "no server path is shown")
			require.NotContains(t, strings.ToLower(text), "sqlstate")
			require.Equal(t, before, dbChecksums(t, h.testBundle), "the database is unchanged")
			require.ElementsMatch(t, files, dataFiles(t, h.testBundle), "no file is kept")
		})
	}
}

// requireEscaped checks that payload appears in the page as text and nowhere as
// markup.
func requireEscaped(t *testing.T, body []byte, payload string) {
	t.Helper()
	require.NotContains(t, string(body), payload, "the payload is not written as markup")
	d, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	require.NoError(t, err)
	require.Contains(t, d.Text(), payload, "the payload is shown as text")
	require.Zero(t, d.Find(`script:not([src])`).FilterFunction(func(_ int, s *goquery.Selection) bool {
		return strings.Contains(s.Text(), "alert")
	}).Length(), "no injected script")
	require.Zero(t, d.Find(`[onerror], [onload], [onclick], [onmouseover]`).FilterFunction(func(_ int, s *goquery.Selection) bool {
		for _, a := range s.Nodes[0].Attr {
			if strings.HasPrefix(a.Key, "on") && strings.Contains(a.Val, "alert") {
				return true
			}
		}
		return false
	}).Length(), "no injected event handler")
	require.Zero(t, d.Find(`b:contains("Bold")`).Length(), "no injected element")
}

// TestHostileTextIsStoredVerbatimAndShownEscaped imports, types and names things
// with markup, quotes and SQL in them: they are valid text, stored as they were
// written, and every page that shows them escapes them.
func TestHostileTextIsStoredVerbatimAndShownEscaped(t *testing.T) {
	t.Parallel()
	h := setupHostile(t)
	ctx := context.Background()
	page := func(path string) []byte {
		resp := h.c.get(path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return b
	}

	resp := h.importFile(t, "script_injection.srt", corpus(t, "subtitles/script_injection.srt"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp = h.importFile(t, "sql_injection.srt", corpus(t, "subtitles/sql_injection.srt"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp = h.importFile(t, "names_injection.csv", corpus(t, "subtitles/names_injection.csv"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp = h.importFile(t, "formula.csv", corpus(t, "subtitles/formula.csv"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp = h.importFile(t, "utf16le_bom.srt", corpus(t, "subtitles/utf16le_bom.srt"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	dup := []byte("1\n00:00:01,000 --> 00:00:02,000\nTwice said\n\n2\n00:00:01,000 --> 00:00:02,000\nTwice said\n")
	resp = h.importFile(t, "dup.srt", dup)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	require.Contains(t, string(b), "Imported 1 line from dup.srt.")
	require.Contains(t, string(b), "Skipped 1 exact duplicate ")
	for file, readAs := range map[string]string{"latin1.srt": "windows-1252", "gbk.srt": "gb18030", "utf16le_no_bom.srt": "utf-16le"} {
		resp = h.importFile(t, file, corpus(t, "subtitles/"+file))
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		require.Contains(t, string(b), "Read as "+readAs+", format SRT.")
	}

	lines, err := h.store.AllLines(ctx, h.testBundle.project.ID)
	require.NoError(t, err)
	texts := map[string]bool{}
	for _, l := range lines {
		texts[l.Text] = true
	}
	for _, want := range []string{`<script>alert("xss")</script>`, `<img src=x onerror=alert(1)> & "quotes" 'single'`,
		`</td></tr><tr><td>broken out of the table`, `Robert'); DROP TABLE lines;--`,
		`' OR '1'='1' UNION SELECT password_hash FROM users --`, "Hello from UTF-16",
		"Café crème brûlée", "你好，世界。这是一个测试。", "Hello"} {
		require.True(t, texts[want], "stored verbatim: %q", want)
	}
	var users int
	require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&users))
	require.Len(t, h.users, users, "the SQL in the text stayed text")

	editor := page(fmt.Sprintf("%s?q=%s", h.project, url.QueryEscape("alert")))
	requireEscaped(t, editor, `<script>alert("xss")</script>`)
	requireEscaped(t, page(h.project+"?q=onerror"), `<img src=x onerror=alert(1)>`)
	requireEscaped(t, page(h.project+"/characters"), `<b>Bold</b> O'Brien`)

	// Project and character names, and an inline edit.
	name := `<script>alert('project')</script> "Q" & <b>Bold</b>`
	resp = h.c.htmx("POST", "/projects", url.Values{"name": {name}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	requireEscaped(t, page("/projects"), name)
	resp = h.c.htmx("POST", h.project+"/characters", h.characterForm(`<img src=x onerror=alert(2)>`))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	requireEscaped(t, page(h.project+"/characters"), `<img src=x onerror=alert(2)>`)

	f := h.lineForm()
	typed := `</textarea><script>alert("edit")</script><b>Bold</b>`
	f.Set("text", typed)
	f.Set("notes", `"><img src=x onerror=alert(3)>`)
	resp = h.editLine(f)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	requireEscaped(t, body, typed)
	form := h.c.htmx("GET", fmt.Sprintf("%s/lines/%d/edit", h.project, h.line.ID), nil)
	require.Equal(t, http.StatusOK, form.StatusCode)
	body, err = io.ReadAll(form.Body)
	require.NoError(t, err)
	requireEscaped(t, body, typed)
	d, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, typed, d.Find(`textarea[name=text]`).Text(), "the text area holds the text, not markup")
	notes, _ := d.Find(`input[name=notes]`).Attr("value")
	require.Equal(t, `"><img src=x onerror=alert(3)>`, notes)

	// A reference voice uploaded under a path-like name keeps only a display name.
	// (Four seconds of tone: a reference must last REFERENCE_MIN_SECONDS.)
	fixed := sourceFile(t, "voice.wav", "-f", "lavfi", "-i", "sine=frequency=220:sample_rate=16000:duration=4")
	for _, name := range []string{"../../etc/passwd", `C:\Users\x\..\voice.wav`, "<script>x</script>.wav"} {
		resp := h.upload(t, "file", name, fixed)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%q", name)
		ch, err := h.store.Character(ctx, h.testBundle.project.ID, h.char.ID)
		require.NoError(t, err)
		require.NotContains(t, ch.RefAudioName, "/")
		require.NotContains(t, ch.RefAudioName, `\`)
		require.NotContains(t, ch.RefAudioName, "\x00")
		requireEscapedOrAbsent(t, page(h.project+"/characters"), "<script>x</script>")
	}
}

func requireEscapedOrAbsent(t *testing.T, body []byte, payload string) {
	t.Helper()
	require.NotContains(t, string(body), payload)
}

// countingBody is a request body of n zero bytes that counts what the server reads.
type countingBody struct {
	left int64
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), b.left))
	clear(p[:n])
	b.left -= int64(n)
	b.read.Add(int64(n))
	return n, nil
}

// TestBodiesAreBoundedBeforeAnythingReadsThem: an anonymous 200 MB POST to /login
// used to be read whole (and a multipart one spooled to disk) before the CSRF check.
// A body announced past its route's limit is refused with 413 unread; one without a
// length stops at the limit; a multipart upload without the header has only its
// first 64 KiB read for the token, and a right token still lets the file through.
func TestBodiesAreBoundedBeforeAnythingReadsThem(t *testing.T) {
	t.Parallel()
	h := setupHostile(t)
	handler := h.server.Config.Handler
	serve := func(path string, body *countingBody, length int64, ct string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, body)
		req.ContentLength = length
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Cookie", h.c.cookie)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec
	}
	const huge = 200 << 20

	body := &countingBody{left: huge}
	req := httptest.NewRequest(http.MethodPost, "/login", body)
	req.ContentLength = huge
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Zero(t, body.read.Load(), "refused on its announced length, unread")
	require.Contains(t, rec.Body.String(), "1024 KiB")

	body = &countingBody{left: huge}
	rec = serve(h.project+"/glossary", body, -1, "application/x-www-form-urlencoded", h.htmxHeaders())
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "a body without a length stops at the limit")
	require.LessOrEqual(t, body.read.Load(), h.cfg.MaxFormBytes+64<<10)

	ref := fmt.Sprintf("%s/characters/%d/reference", h.project, h.char.ID)
	body = &countingBody{left: huge}
	rec = serve(ref, body, huge, "multipart/form-data; boundary=x", h.htmxHeaders())
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "an upload past MAX_UPLOAD_MB is refused unread")
	require.Zero(t, body.read.Load())

	// A multipart body without the header: the token is looked for in its first 64
	// KiB only, and a wrong one refuses the upload before the file is read.
	wav := sourceFile(t, "voice.wav", "-f", "lavfi", "-i", "sine=frequency=220:sample_rate=24000:duration=4")
	padding := strings.Repeat("x", 100<<10)
	mp, ct := fileUpload(t, "file", "voice.wav", wav, url.Values{"_csrf": {"wrong"}, "pad": {padding}})
	raw, err := io.ReadAll(mp)
	require.NoError(t, err)
	peek := &peekBody{data: raw}
	req = httptest.NewRequest(http.MethodPost, ref, peek)
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Cookie", h.c.cookie)
	rec = httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.LessOrEqual(t, peek.read, int64(64<<10), "only the token's prefix was read")

	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	require.NoError(t, w.WriteField("_csrf", h.c.csrf))
	fw, err := w.CreateFormFile("file", "voice.wav")
	require.NoError(t, err)
	_, err = fw.Write(wav)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	resp := h.c.do("POST", ref, &buf, w.FormDataContentType(), map[string]string{"HX-Request": "true"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "the token field in front of the file lets it through, body intact")
	ch, err := h.store.Character(context.Background(), h.testBundle.project.ID, h.char.ID)
	require.NoError(t, err)
	require.NotNil(t, ch.RefAudioSHA256, "the file arrived whole")
}

// peekBody is a request body that counts what the server reads of it.
type peekBody struct {
	data []byte
	read int64
}

func (b *peekBody) Read(p []byte) (int, error) {
	if b.read >= int64(len(b.data)) {
		return 0, io.EOF
	}
	n := copy(p, b.data[b.read:])
	b.read += int64(n)
	return n, nil
}

// loginVia logs in through srv with extra request headers (an X-Forwarded-For).
func loginVia(t *testing.T, srv *httptest.Server, username, password string, hdr map[string]string) *http.Response {
	t.Helper()
	c := &client{t: t, base: srv.URL}
	resp := c.do("GET", "/login", nil, "", hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, x := range resp.Cookies() {
		if x.Name == "dubstudio_login_csrf" {
			c.cookie = x.Name + "=" + x.Value
		}
	}
	c.csrf, _ = doc(t, resp).Find(`input[name=_csrf]`).Attr("value")
	form := url.Values{"username": {username}, "password": {password}, "_csrf": {c.csrf}}
	return c.do("POST", "/login", strings.NewReader(form.Encode()), "application/x-www-form-urlencoded", hdr)
}

// TestLoginThrottleCannotBeDodgedOrTurnedIntoALockout: a rotating X-Forwarded-For
// used to escape the throttle, and failures from one address locked the user out
// everywhere with no way to lift it. The address is the connection's unless
// TRUSTED_PROXIES names the proxy; failures from one address pause only that address;
// an admin sees the pause and lifts it, and a password reset lifts it too.
func TestLoginThrottleCannotBeDodgedOrTurnedIntoALockout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ed := b.users[studio.RoleEditor]
	xff := func(ip string) map[string]string { return map[string]string{"X-Forwarded-For": ip} }

	// No trusted proxy: the header is ignored, rotating it does not reset the count.
	for i := range 3 {
		resp := loginVia(t, b.server, ed.Username, "wrong-password", xff(fmt.Sprintf("198.51.100.%d", i)))
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	resp := loginVia(t, b.server, ed.Username, studiotest.Password, xff("198.51.100.99"))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a forged X-Forwarded-For does not dodge the throttle")

	// The admin sees the pause on the users page and lifts it.
	admin := b.as(t, studio.RoleAdmin)
	d := doc(t, admin.get("/admin/users"))
	require.Equal(t, 1, d.Find(`[data-testid=throttled]`).Length())
	resp = admin.post(fmt.Sprintf("/admin/users/%d/unlock", ed.ID), nil, true)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Zero(t, doc(t, resp).Find(`[data-testid=throttled]`).Length())
	require.Equal(t, http.StatusSeeOther, loginVia(t, b.server, ed.Username, studiotest.Password, nil).StatusCode, "unlocked at once")

	// Behind a trusted proxy: an attacker's address is paused, the user's is not.
	cfg := *b.cfg
	cfg.TrustedProxies = []*net.IPNet{{IP: net.IPv4(127, 0, 0, 1), Mask: net.CIDRMask(32, 32)}}
	proxied := httptest.NewServer(web.New(web.Deps{Config: &cfg, Store: b.store, Logger: slog.New(slog.DiscardHandler)}).Handler())
	t.Cleanup(proxied.Close)
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, loginVia(t, proxied, ed.Username, "wrong-password", xff("203.0.113.9")).StatusCode)
	}
	require.Equal(t, http.StatusTooManyRequests, loginVia(t, proxied, ed.Username, studiotest.Password, xff("203.0.113.9")).StatusCode)
	require.Equal(t, http.StatusSeeOther, loginVia(t, proxied, ed.Username, studiotest.Password, xff("192.0.2.44")).StatusCode,
		"the user logs in from their own address")

	// A password reset by an admin lifts the pause.
	resp = admin.post(fmt.Sprintf("/admin/users/%d/password", ed.ID), nil, true)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	notice := doc(t, resp).Find(`[data-testid=notice]`).Text()
	fields := strings.Fields(notice)
	require.NotEmpty(t, fields)
	password := fields[len(fields)-1] // "New password for NAME (shown once): PASSWORD"
	require.Equal(t, http.StatusSeeOther, loginVia(t, proxied, ed.Username, password, xff("203.0.113.9")).StatusCode,
		"the new password works at once from the paused address")
}

// TestNULAndInvalidUTF8AreRefusedWith400: a NUL or invalid UTF-8 byte in search, the
// glossary, a comment or the login name used to reach Postgres and give a 500. Every
// query and form value is checked first; nothing changes.
func TestNULAndInvalidUTF8AreRefusedWith400(t *testing.T) {
	t.Parallel()
	h := setupHostile(t)
	before := dbChecksums(t, h.testBundle)
	for _, bad := range []string{"a\x00b", "caf\xe9", "\xff\xfe"} {
		resp := h.c.get(h.project + "/lines?q=" + url.QueryEscape(bad))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "search %q", bad)
		require.Contains(t, readAll(t, resp), "UTF-8")
		resp = h.c.htmx("POST", h.project+"/glossary", url.Values{"term": {bad}, "replacement": {"x"}})
		require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, resp.StatusCode, "glossary %q: refused, not a 500", bad)
		// Every form field is checked before any handler reads it (web.limitBody).
		resp = h.editLine(url.Values{"text": {bad}, "base_revision": {fmt.Sprint(h.line.Revision)}})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "line text %q", bad)
		require.Contains(t, readAll(t, resp), "UTF-8")
		resp = h.editLine(url.Values{"text": {"fine"}, "notes": {bad}, "base_revision": {fmt.Sprint(h.line.Revision)}})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "line notes %q", bad)
		resp = h.c.htmx("POST", h.project+"/characters", h.characterForm(bad))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "character name %q", bad)
		resp = loginVia(t, h.server, bad, "whatever-password", nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "login name %q", bad)
		// A multipart form without a file, its fields parsed in memory.
		body, ct := multipartFields(t, url.Values{"_csrf": {h.c.csrf}, "term": {bad}, "replacement": {"x"}})
		resp = h.c.do("POST", h.project+"/glossary", body, ct, h.htmxHeaders())
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "multipart glossary %q", bad)
		// A reference voice whose file name is not text.
		// (A NUL byte makes the part's header unreadable: no file, 422.)
		resp = h.upload(t, "file", "voice"+bad+".wav", corpus(t, "audio/text_as.wav"))
		require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, resp.StatusCode, "file name %q", bad)
		// A JSON body: no route reads one, and none gets past limitBody with bad text.
		for _, js := range []string{`{"text": "` + bad + `"}`, `{"text": "a\u0000b"}`} {
			resp = h.c.do("POST", h.project+"/glossary", strings.NewReader(js), "application/json", h.htmxHeaders())
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "JSON %q", js)
		}
	}
	// A JSON body of good text goes on to the route, which finds no form in it.
	resp := h.c.do("POST", h.project+"/glossary", strings.NewReader(`{"text": "a\\u0000 is six characters"}`), "application/json", h.htmxHeaders())
	require.NotEqual(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, before, dbChecksums(t, h.testBundle), "nothing changed")
}

// TestLoginRedirectStaysOnTheSite: browsers drop a tab and read a backslash as a
// slash, so "/\t/evil.example" left the site after login.
func TestLoginRedirectStaysOnTheSite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ed := b.users[studio.RoleEditor]
	redirects := map[string]string{}
	for _, line := range strings.Split(string(corpus(t, "redirects.txt")), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		next, want, ok := strings.Cut(line, "\t")
		require.True(t, ok, "%q", line)
		next, err := strconv.Unquote(`"` + next + `"`)
		require.NoError(t, err, "%q", line)
		redirects[next] = want
	}
	require.Contains(t, redirects, "/\t/evil.example")
	for next, want := range redirects {
		c := &client{t: t, base: b.server.URL}
		resp := c.get("/login")
		for _, x := range resp.Cookies() {
			if x.Name == "dubstudio_login_csrf" {
				c.cookie = x.Name + "=" + x.Value
			}
		}
		c.csrf, _ = doc(t, resp).Find(`input[name=_csrf]`).Attr("value")
		resp = c.post("/login?next="+url.QueryEscape(next), url.Values{"username": {ed.Username}, "password": {studiotest.Password}}, true)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%q", next)
		require.Equal(t, want, resp.Header.Get("Location"), "%q", next)
	}
}
