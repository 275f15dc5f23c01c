package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/config"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/web"
)

type testBundle struct {
	store   *studio.Store
	server  *httptest.Server
	cfg     *config.Config
	users   map[studio.Role]*studio.User
	project *studio.Project
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	store := studiotest.Store(t)
	cfg, err := config.LoadFrom(func(k string) (string, bool) {
		switch k {
		case "DATA_DIR":
			return t.TempDir(), true
		case "MAX_UPLOAD_MB":
			return "1", true
		case "LOGIN_MAX_FAILS":
			return "3", true
		}
		return "", false
	})
	require.NoError(t, err)
	cfg.SessionSecret = strings.Repeat("k", 32)
	srv := web.New(web.Deps{Config: cfg, Store: store, Logger: slog.New(slog.DiscardHandler)})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	b := &testBundle{store: store, server: ts, cfg: cfg, users: map[studio.Role]*studio.User{}}
	for _, r := range studio.Roles {
		b.users[r] = studiotest.User(t, store, r)
	}
	b.project = studiotest.Project(t, store, b.users[studio.RoleEditor], 3)
	return b
}

// client is a browser-like HTTP client: no redirects followed, cookies kept by hand.
type client struct {
	t      testing.TB
	base   string
	cookie string
	csrf   string
}

func (b *testBundle) anon(t testing.TB) *client { return &client{t: t, base: b.server.URL} }

func (b *testBundle) as(t testing.TB, role studio.Role) *client {
	token, sess, err := b.store.CreateSession(context.Background(), b.users[role].ID, time.Hour)
	require.NoError(t, err)
	return &client{t: t, base: b.server.URL, cookie: "dubstudio_session=" + token, csrf: sess.CSRFToken}
}

func (c *client) do(method, path string, body io.Reader, contentType string, hdr map[string]string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, body)
	require.NoError(c.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.cookie != "" {
		req.Header.Set("Cookie", c.cookie)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	require.NoError(c.t, err)
	c.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (c *client) get(path string) *http.Response { return c.do("GET", path, nil, "", nil) }

// post sends a form with the CSRF token (withCSRF false leaves it out).
func (c *client) post(path string, form url.Values, withCSRF bool) *http.Response {
	if form == nil {
		form = url.Values{}
	}
	if withCSRF {
		form.Set("_csrf", c.csrf)
	}
	return c.do("POST", path, strings.NewReader(form.Encode()), "application/x-www-form-urlencoded", nil)
}

func (c *client) htmx(method, path string, form url.Values) *http.Response {
	var body io.Reader
	ct := ""
	if form != nil {
		body, ct = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	}
	return c.do(method, path, body, ct, map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf})
}

func doc(t *testing.T, resp *http.Response) *goquery.Document {
	t.Helper()
	d, err := goquery.NewDocumentFromReader(resp.Body)
	require.NoError(t, err)
	return d
}

func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	page, err := b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	line := page.Lines[0]
	chars, _ := b.store.Characters(ctx, b.project.ID)
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	l := fmt.Sprintf("%s/lines/%d", p, line.ID)
	ch := fmt.Sprintf("%s/characters/%d", p, chars[0].ID)
	uid := fmt.Sprintf("/admin/users/%d", b.users[studio.RoleEditor].ID)

	const (
		anon = iota
		editor
		manager
		admin
	)
	// min is the least role that may use the route; anonymous visitors are sent to
	// the login page (GET) or refused (POST), lesser roles get 403.
	routes := []struct {
		method, path string
		min          int
	}{
		{"GET", "/projects", editor},
		{"GET", p, editor},
		{"GET", p + "/settings", editor},
		{"GET", p + "/progress", editor},
		{"GET", p + "/lines", editor},
		{"GET", l, editor},
		{"GET", l + "/edit", editor},
		{"GET", l + "/history", editor},
		{"GET", p + "/characters", editor},
		{"GET", p + "/export.srt", editor},
		{"GET", p + "/export.csv", editor},
		{"GET", p + "/export.vtt", editor},
		{"GET", p + "/export.ass", editor},
		{"GET", p + "/export?format=vtt", editor},
		{"POST", "/projects", editor},
		{"POST", p + "/rename", editor},
		{"POST", p + "/import", editor},
		{"POST", p + "/lines/assign", editor},
		{"POST", l, editor},
		{"POST", l + "/split", editor},
		{"POST", l + "/merge", editor},
		{"POST", p + "/characters", editor},
		{"POST", ch, editor},
		{"POST", ch + "/reference", editor},
		{"POST", "/me/lang", editor},
		{"POST", p + "/render", editor},
		{"POST", p + "/retry-failed", editor},
		{"POST", p + "/cancel", editor},
		{"POST", p + "/lines/render", editor},
		{"POST", l + "/render", editor},
		{"GET", l + "/takes", editor},
		{"POST", p + "/takes/999999/approve", editor},
		{"POST", p + "/takes/999999/use", editor},
		{"GET", p + "/failed", editor},
		{"GET", p + "/exports", editor},
		{"POST", p + "/exports", editor},
		{"GET", p + "/exports/999999/download", editor},
		{"POST", p + "/glossary", editor},
		{"POST", p + "/glossary/999999/delete", editor},
		{"POST", p + "/fit", editor},
		{"POST", ch + "/emotion-audio", editor},
		{"POST", ch + "/delete", editor},
		{"GET", "/dashboard", manager},
		{"GET", p + "/dashboard", manager},
		{"GET", "/admin/workers", admin},
		{"POST", "/admin/queue/pause", admin},
		{"POST", "/admin/queue/resume", admin},
		{"POST", p + "/archive", manager},
		{"POST", p + "/unarchive", manager},
		{"GET", "/admin/users", admin},
		{"POST", "/admin/users", admin},
		{"POST", uid + "/role", admin},
		{"POST", uid + "/password", admin},
		{"POST", uid + "/disabled", admin},
	}
	clients := []*client{b.anon(t), b.as(t, studio.RoleEditor), b.as(t, studio.RoleManager), b.as(t, studio.RoleAdmin)}
	for _, rt := range routes {
		for who, c := range clients {
			var resp *http.Response
			if rt.method == "GET" {
				resp = c.get(rt.path)
			} else {
				resp = c.post(rt.path, nil, true)
			}
			switch {
			case who == anon && rt.method == "GET":
				require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s %s anonymous", rt.method, rt.path)
				require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login?next="), rt.path)
			case who == anon:
				require.Contains(t, []int{http.StatusForbidden, http.StatusUnauthorized}, resp.StatusCode, "%s %s anonymous", rt.method, rt.path)
			case who < rt.min:
				require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %s as role %d", rt.method, rt.path, who)
			default:
				require.NotContains(t, []int{http.StatusForbidden, http.StatusUnauthorized, http.StatusInternalServerError}, resp.StatusCode,
					"%s %s as role %d", rt.method, rt.path, who)
			}
		}
	}
	// Delete last: it removes the project.
	require.Equal(t, http.StatusForbidden, clients[editor].post(p+"/delete", url.Values{"confirm": {b.project.Name}}, true).StatusCode)
	require.Equal(t, http.StatusSeeOther, clients[manager].post(p+"/delete", url.Values{"confirm": {b.project.Name}}, true).StatusCode)
}

func TestUnsafeRequestsNeedTheCSRFToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleAdmin)
	for _, path := range []string{"/projects", "/admin/users", "/me/lang", fmt.Sprintf("/projects/%d/rename", b.project.ID)} {
		resp := c.post(path, url.Values{"name": {"x"}, "username": {"mallory"}, "role": {"admin"}}, false)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
	}
	// A wrong token is as bad as none.
	resp := c.do("POST", "/projects", strings.NewReader("name=x&_csrf=wrong"), "application/x-www-form-urlencoded", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	// Nothing changed.
	_, err := b.store.UserByUsername(context.Background(), "mallory")
	require.ErrorIs(t, err, studio.ErrNotFound)
	ps, _ := b.store.Projects(context.Background(), studio.ProjectsOpts{})
	require.Len(t, ps, 1)
	// The login form is protected too.
	resp = b.anon(t).post("/login", url.Values{"username": {"admin"}, "password": {"x"}}, false)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

func loginForm(t *testing.T, b *testBundle, username, password string) *http.Response {
	c := b.anon(t)
	resp := c.get("/login")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var ck *http.Cookie
	for _, x := range resp.Cookies() {
		if x.Name == "dubstudio_login_csrf" {
			ck = x
		}
	}
	require.NotNil(t, ck)
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, ck.SameSite)
	tok, _ := doc(t, resp).Find(`input[name=_csrf]`).Attr("value")
	c.cookie = ck.Name + "=" + ck.Value
	c.csrf = tok
	return c.post("/login", url.Values{"username": {username}, "password": {password}}, true)
}

func TestLoginLogoutAndThrottling(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ed := b.users[studio.RoleEditor]

	resp := loginForm(t, b, ed.Username, studiotest.Password)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var sess *http.Cookie
	for _, x := range resp.Cookies() {
		if x.Name == "dubstudio_session" {
			sess = x
		}
	}
	require.NotNil(t, sess)
	require.True(t, sess.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, sess.SameSite)

	c := &client{t: t, base: b.server.URL, cookie: "dubstudio_session=" + sess.Value}
	require.Equal(t, http.StatusOK, c.get("/projects").StatusCode)
	csrf, _ := doc(t, c.get("/projects")).Find(`form[action="/logout"] input[name=_csrf]`).Attr("value")
	c.csrf = csrf
	require.Equal(t, http.StatusSeeOther, c.post("/logout", nil, true).StatusCode)
	require.Equal(t, http.StatusSeeOther, c.get("/projects").StatusCode, "the session is gone after logout")

	// Wrong passwords: after LOGIN_MAX_FAILS (3 here) even the right one is refused.
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, loginForm(t, b, ed.Username, "wrong-password").StatusCode)
	}
	resp = loginForm(t, b, ed.Username, studiotest.Password)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=login-error]`).Text(), "Too many failed attempts")
}

func TestExpiredSessionGoesToLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _, err := b.store.CreateSession(context.Background(), b.users[studio.RoleEditor].ID, -time.Minute)
	require.NoError(t, err)
	c := &client{t: t, base: b.server.URL, cookie: "dubstudio_session=" + token}
	resp := c.get("/projects")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Location"), "/login")
}

func TestInlineEditAndStaleSave(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	l, path := firstLine(t, b)
	form := func(text string, rev int) url.Values { return lineEdit(l, text, rev) }
	alice, bob := b.as(t, studio.RoleEditor), b.as(t, studio.RoleManager)

	resp := alice.htmx("POST", path, form(`She said "<b>no</b>" & left.`, l.Revision))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	require.Equal(t, `She said "<b>no</b>" & left.`, strings.TrimSpace(d.Find(`.script-text`).Text()), "text is escaped, not markup")
	require.Zero(t, d.Find(`.script-text b`).Length())

	// Bob saves from the revision he loaded before Alice's save.
	resp = bob.htmx("POST", path, form("Bob's version", l.Revision))
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	d = doc(t, resp)
	require.Contains(t, d.Find(`[data-testid=their-text]`).Text(), `She said "<b>no</b>" & left.`)
	require.Equal(t, "Bob's version", d.Find(`textarea[name=text]`).Text(), "what Bob typed is kept")
	rev, _ := d.Find(`input[name=base_revision]`).Attr("value")
	require.Equal(t, fmt.Sprint(l.Revision+1), rev)
	cur, _ := b.store.Line(ctx, b.project.ID, l.ID)
	require.Equal(t, `She said "<b>no</b>" & left.`, cur.Text)

	// Bad input: inline errors, nothing saved.
	bad := form("fine", cur.Revision)
	bad.Set("end", "banana")
	resp = alice.htmx("POST", path, bad)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.NotEmpty(t, doc(t, resp).Find(`[data-testid=field-error]`).Text())
	after, _ := b.store.Line(ctx, b.project.ID, l.ID)
	require.Equal(t, cur.Revision, after.Revision)

	// History shows who changed what.
	hist := doc(t, alice.htmx("GET", path+"/history", nil))
	require.Contains(t, hist.Text(), b.users[studio.RoleEditor].Username)
}

// TestEmotionVectorReadsByName: a line's emotion vector shows the dimensions that are
// not zero by name, in the user's language, in the script and in the line's history;
// the edit form keeps the numbers as typed.
func TestEmotionVectorReadsByName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l, path := firstLine(t, b)
	c := b.as(t, studio.RoleEditor)
	form := lineEdit(l, l.Text, l.Revision)
	form.Set("emotion_mode", "vector")
	form.Set("emotion_value", "0.1,0,0.3,0,0,0,0,0.25")
	resp := c.htmx("POST", path, form)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	row := strings.Join(strings.Fields(doc(t, resp).Text()), " ")
	require.Contains(t, row, "Emotion vector: happy 0.1, sad 0.3, calm 0.25")

	hist := strings.Join(strings.Fields(doc(t, c.htmx("GET", path+"/history", nil)).Text()), " ")
	require.Contains(t, hist, "Emotion vector: happy 0.1, sad 0.3, calm 0.25")

	edit := doc(t, c.htmx("GET", path+"/edit", nil))
	v, _ := edit.Find(`input[name=emotion_value]`).Attr("value")
	require.Equal(t, "0.1,0,0.3,0,0,0,0,0.25", v)

	require.Equal(t, http.StatusSeeOther, c.post("/me/lang", url.Values{"lang": {"zh"}}, true).StatusCode)
	script := strings.Join(strings.Fields(doc(t, c.get(fmt.Sprintf("/projects/%d", b.project.ID))).Text()), " ")
	require.Contains(t, script, "情感向量: 高兴 0.1, 悲伤 0.3, 平静 0.25")
}

// firstLine is the bundle's first line and its path.
func firstLine(t *testing.T, b *testBundle) (studio.Line, string) {
	page, err := b.store.Lines(context.Background(), b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	l := page.Lines[0]
	return l, fmt.Sprintf("/projects/%d/lines/%d", b.project.ID, l.ID)
}

// lineEdit is an inline edit of l saving text from revision rev.
func lineEdit(l studio.Line, text string, rev int) url.Values {
	return url.Values{"text": {text}, "base_revision": {fmt.Sprint(rev)}, "start": {"00:00:00.000"}, "end": {"00:00:01.500"},
		"duration_lock": {"1"}, "character_id": {fmt.Sprint(*l.CharacterID)}}
}

func multipartBody(t *testing.T, field, name string, data []byte) (io.Reader, string) {
	var buf strings.Builder
	w := multipart.NewWriter(&buf)
	fw, err := w.CreateFormFile(field, name)
	require.NoError(t, err)
	_, err = fw.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return strings.NewReader(buf.String()), w.FormDataContentType()
}

func TestImportRefusesBadFilesWholly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d/import", b.project.ID)
	bad := "1\n00:00:01,000 --> 00:00:02,000\nHello\n\n2\n00:00:03,000 --> nonsense\nWorld\n\n3\n00:00:05,000 --> 00:00:04,000\nBackwards\n"
	body, ct := multipartBody(t, "file", "../../etc/passwd.srt", []byte(bad))
	resp := c.do("POST", path, body, ct, map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	d := doc(t, resp)
	problems := d.Find(`[data-testid=import-problems] li`)
	require.GreaterOrEqual(t, problems.Length(), 2)
	require.Contains(t, problems.Text(), "6")
	require.Contains(t, d.Text(), "passwd.srt")
	require.NotContains(t, d.Text(), "../")
	page, _ := b.store.Lines(context.Background(), b.project.ID, studio.LineFilter{})
	require.EqualValues(t, 3, page.Total, "nothing imported")

	good := "1\n00:00:10,000 --> 00:00:11,000\nCAROL: Hi <there>\n"
	body, ct = multipartBody(t, "file", "ok.srt", []byte(good))
	resp = c.do("POST", path, body, ct, map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=import-ok]`).Text(), "CAROL")
}

func TestReferenceUploadIsProbedAndLimited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	chars, _ := b.store.Characters(context.Background(), b.project.ID)
	path := fmt.Sprintf("/projects/%d/characters/%d/reference", b.project.ID, chars[0].ID)
	hdr := map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf}

	body, ct := multipartBody(t, "file", "voice.wav", []byte("this is text pretending to be a wav file"))
	resp := c.do("POST", path, body, ct, hdr)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.NotEmpty(t, doc(t, resp).Find(`[data-testid=field-error]`).Text())

	body, ct = multipartBody(t, "file", "huge.wav", make([]byte, 2<<20)) // limit is 1 MB here
	resp = c.do("POST", path, body, ct, hdr)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Contains(t, doc(t, resp).Text(), "1 MB")

	ch, _ := b.store.Character(context.Background(), b.project.ID, chars[0].ID)
	require.Nil(t, ch.RefAudioSHA256, "nothing stored")
}

func TestLanguageFollowsBrowserThenUser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	resp := c.do("GET", "/projects", nil, "", map[string]string{"Accept-Language": "zh-CN,zh;q=0.9"})
	require.Contains(t, doc(t, resp).Find("h1").Text(), "项目")
	require.Equal(t, http.StatusSeeOther, c.post("/me/lang", url.Values{"lang": {"en"}}, true).StatusCode)
	resp = c.do("GET", "/projects", nil, "", map[string]string{"Accept-Language": "zh-CN"})
	require.Contains(t, doc(t, resp).Find("h1").Text(), "Projects")
}

func TestProjectSettingsGlossaryAndFitLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	base := fmt.Sprintf("/projects/%d", b.project.ID)

	resp := c.post(base+"/glossary", url.Values{"term": {"NASA"}, "spoken": {"nasa"}}, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	d := doc(t, c.get(base+"/settings"))
	require.Equal(t, 1, d.Find(`[data-testid=glossary-row]`).Length())

	resp = c.post(base+"/glossary", url.Values{"term": {""}, "spoken": {"x"}}, true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)

	resp = c.post(base+"/fit", url.Values{"stretch_min": {"0.3"}, "stretch_max": {"abc"}, "gap_borrow_ms": {"300"},
		"loudness_lufs": {"-23"}, "max_speed_step": {"0.15"}}, true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	d = doc(t, resp)
	require.Equal(t, 1, d.Find(`[data-testid=fit-form] [data-testid=field-error]`).Length(), "the number error first")
	v, _ := d.Find(`input[name=stretch_min]`).Attr("value")
	require.Equal(t, "0.3", v, "what was typed is kept")

	resp = c.post(base+"/fit", url.Values{"stretch_min": {"0.3"}, "stretch_max": {"1.3"}, "gap_borrow_ms": {"300"},
		"loudness_lufs": {"-23"}, "max_speed_step": {"0.15"}}, true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=fit-form]`).Text(), "Between 0.5 and 1")

	resp = c.post(base+"/fit", url.Values{"stretch_min": {"0.9"}, "stretch_max": {"1.3"}, "gap_borrow_ms": {"200"},
		"loudness_lufs": {"-16"}, "max_speed_step": {"0.1"}}, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	p, err := b.store.Project(context.Background(), b.project.ID)
	require.NoError(t, err)
	require.Equal(t, studio.FitSettings{StretchMin: 0.9, StretchMax: 1.3, GapBorrowMs: 200, LoudnessLUFS: -16, MaxSpeedStep: 0.1}, p.FitSettings())
}

func TestReferenceAndEmotionAudioUpload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	ctx := context.Background()
	chars, _ := b.store.Characters(ctx, b.project.ID)
	wav := filepath.Join(t.TempDir(), "voice.wav")
	if out, err := exec.Command("espeak-ng", "-w", wav, "This is my voice. I read a few sentences so that the clone has enough to learn from, and then I stop.").CombinedOutput(); err != nil {
		t.Skipf("espeak-ng: %v %s", err, out)
	}
	data, err := os.ReadFile(wav)
	require.NoError(t, err)
	hdr := map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf}
	base := fmt.Sprintf("/projects/%d/characters/%d", b.project.ID, chars[0].ID)

	body, ct := multipartBody(t, "file", "../my voice.wav", data)
	resp := c.do("POST", base+"/reference", body, ct, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, doc(t, resp).Find(`[data-testid=reference-player]`).Length())
	ch, _ := b.store.Character(ctx, b.project.ID, chars[0].ID)
	require.NotNil(t, ch.RefAudioSHA256)
	require.Equal(t, "my voice.wav", ch.RefAudioName, "only the base name is kept, for display")

	served := c.get("/blobs/" + *ch.RefAudioSHA256)
	require.Equal(t, http.StatusOK, served.StatusCode)
	require.Equal(t, "audio/wav", served.Header.Get("Content-Type"))
	require.Equal(t, http.StatusNotFound, c.get("/blobs/..%2F..%2Fsession.secret").StatusCode)

	body, ct = multipartBody(t, "emotion_file", "angry.wav", data)
	resp = c.do("POST", base+"/emotion-audio", body, ct, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ch, err = b.store.Character(ctx, b.project.ID, chars[0].ID)
	require.NoError(t, err)
	require.Equal(t, studio.EmotionAudio, ch.Emotion.Mode)
	require.Equal(t, *ch.RefAudioSHA256, ch.Emotion.AudioSHA256, "same bytes, same blob")
	require.InDelta(t, 0.8, ch.Emotion.Weight, 1e-9)
}
