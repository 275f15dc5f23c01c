package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/web"
)

// asUser is a logged-in client of u.
func (b *testBundle) asUser(t testing.TB, u *studio.User) *client {
	token, sess, err := b.store.CreateSession(context.Background(), u.ID, time.Hour)
	require.NoError(t, err)
	return &client{t: t, base: b.server.URL, cookie: "dubstudio_session=" + token, csrf: sess.CSRFToken}
}

// accessFixture is a project with a line, a character, a take and a glossary entry,
// so that every /projects/:pid route of it can be called with ids that exist.
type accessFixture struct {
	project *studio.Project
	ids     map[string]string // route parameter -> value
	takeSHA string
}

func newAccessFixture(t *testing.T, b *testBundle, p *studio.Project, other *studio.User) accessFixture {
	t.Helper()
	ctx := context.Background()
	ls, err := b.store.AllLines(ctx, p.ID)
	require.NoError(t, err)
	chars, err := b.store.Characters(ctx, p.ID)
	require.NoError(t, err)
	tk := takeWith(t, b, ls[0], 48000, 0, 440)
	require.NoError(t, b.store.AddGlossaryEntry(ctx, p.ID, "NASA", "nasa"))
	g, err := b.store.Glossary(ctx, p.ID)
	require.NoError(t, err)
	id := func(v int64) string { return strconv.FormatInt(v, 10) }
	return accessFixture{project: p, takeSHA: tk.AudioSHA256, ids: map[string]string{
		"pid": id(p.ID), "lid": id(ls[0].ID), "cid": id(chars[0].ID), "tid": id(tk.ID), "gid": id(g[0].ID),
		"uid": id(other.ID), "eid": "999999",
	}}
}

// projectRoute is one route under /projects/:pid, with its parameters filled in.
type projectRoute struct {
	method, pattern, path string
}

// projectRoutes lists every GET and POST route the server has under /projects/:pid,
// from its router, so that a route added later is in the matrix without anyone
// remembering to add it.
func projectRoutes(t *testing.T, b *testBundle, f accessFixture) []projectRoute {
	t.Helper()
	e, ok := b.server.Config.Handler.(*echo.Echo)
	require.True(t, ok, "the server's handler is echo's")
	var out []projectRoute
	seen := map[string]bool{}
	for _, r := range e.Routes() {
		if (r.Method != http.MethodGet && r.Method != http.MethodPost) || !strings.HasPrefix(r.Path, "/projects/:pid") || seen[r.Method+r.Path] {
			continue
		}
		seen[r.Method+r.Path] = true
		parts := strings.Split(r.Path, "/")
		for i, part := range parts {
			if name, ok := strings.CutPrefix(part, ":"); ok {
				v, known := f.ids[name]
				require.True(t, known, "route %s has a parameter %s the test does not fill", r.Path, name)
				parts[i] = v
			}
		}
		out = append(out, projectRoute{method: r.Method, pattern: r.Path, path: strings.Join(parts, "/")})
	}
	require.Greater(t, len(out), 40, "the router lists the project routes")
	return out
}

// send calls rt as c: a GET, or a POST of an empty form with the CSRF token.
func (rt projectRoute) send(c *client) *http.Response {
	if rt.method == http.MethodGet {
		return c.get(rt.path)
	}
	return c.post(rt.path, nil, true)
}

// managerRoutes are the project routes an editor may not use even on a project they
// are a member of.
var managerRoutes = map[string]bool{
	"/projects/:pid/archive": true, "/projects/:pid/unarchive": true, "/projects/:pid/delete": true,
	"/projects/:pid/dashboard": true, "/projects/:pid/dashboard/throughput": true,
	"/projects/:pid/members": true, "/projects/:pid/members/:uid/delete": true,
}

// absentHere are the routes whose object the fixture has none of (an export, a
// source): a 404 from them says nothing about access.
var absentHere = map[string]bool{
	"/projects/:pid/exports/:eid/download": true,
	"/projects/:pid/lines/:lid/source.wav": true,
	"/projects/:pid/video/proxy.mp4":       true,
	"/projects/:pid/video/picture.mp4":     true,
}

// projectSnapshot is what a refused change must leave as it was.
type projectSnapshot struct {
	Project  studio.Project
	Lines    []studio.Line
	Chars    []studio.Character
	Glossary []studio.GlossaryEntry
	Members  []studio.ProjectMember
}

func snapshot(t *testing.T, b *testBundle, id int64) projectSnapshot {
	t.Helper()
	ctx := context.Background()
	var s projectSnapshot
	p, err := b.store.Project(ctx, id)
	require.NoError(t, err)
	s.Project = *p
	s.Lines, err = b.store.AllLines(ctx, id)
	require.NoError(t, err)
	s.Chars, err = b.store.Characters(ctx, id)
	require.NoError(t, err)
	s.Glossary, err = b.store.Glossary(ctx, id)
	require.NoError(t, err)
	s.Members, err = b.store.ProjectMembers(ctx, id)
	require.NoError(t, err)
	return s
}

// TestProjectAccessMatrix is the route x role matrix's membership axis: every route
// under /projects/:pid, as a member editor, a non-member editor, a manager and an
// admin, on an active and an archived project. A non-member gets 404 everywhere (as
// for a project that does not exist), and changes nothing; an archived project answers
// every change with 409 and changes nothing, and still answers reads.
func TestProjectAccessMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	member := b.users[studio.RoleEditor]
	outsider := studiotest.User(t, b.store, studio.RoleEditor)
	active := newAccessFixture(t, b, b.project, outsider)
	archived := newAccessFixture(t, b, studiotest.Project(t, b.store, member, 3), outsider)
	require.NoError(t, b.store.SetProjectArchived(ctx, archived.project.ID, true))

	clients := map[string]*client{
		"member editor": b.asUser(t, member), "non-member editor": b.asUser(t, outsider),
		"manager": b.as(t, studio.RoleManager), "admin": b.as(t, studio.RoleAdmin),
	}
	before := map[int64]projectSnapshot{active.project.ID: snapshot(t, b, active.project.ID), archived.project.ID: snapshot(t, b, archived.project.ID)}
	for _, f := range []accessFixture{active, archived} {
		isArchived := f.project.ID == archived.project.ID
		for _, rt := range projectRoutes(t, b, f) {
			for who, c := range clients {
				where := fmt.Sprintf("%s %s as %s (archived %v)", rt.method, rt.pattern, who, isArchived)
				switch {
				case who == "non-member editor":
					require.Equal(t, http.StatusNotFound, rt.send(c).StatusCode, where)
				case rt.method == http.MethodPost && !isArchived:
					// Changes to the active project are TestAuthorizationMatrix's; here
					// they would archive or delete it mid-matrix.
				case slices.Contains(web.ArchivedWrites, rt.pattern):
					// Tested below: they restore, delete and play.
				case who == "member editor" && managerRoutes[rt.pattern]:
					require.Equal(t, http.StatusForbidden, rt.send(c).StatusCode, where)
				case rt.method == http.MethodPost:
					require.Equal(t, http.StatusConflict, rt.send(c).StatusCode, where)
				default:
					status := rt.send(c).StatusCode
					require.NotContains(t, []int{http.StatusForbidden, http.StatusConflict, http.StatusInternalServerError}, status, where)
					if !absentHere[rt.pattern] {
						require.NotEqual(t, http.StatusNotFound, status, where)
					}
				}
			}
		}
	}
	for id, want := range before {
		require.Equal(t, want, snapshot(t, b, id), "project %d unchanged", id)
	}

	// An unknown project answers as a forbidden one does.
	require.Equal(t, http.StatusNotFound, clients["member editor"].get("/projects/999999").StatusCode)
}

// TestArchivedProjectIsReadOnlyUntilRestored: a change to an archived project is
// refused with a message the user sees (in the htmx flash, in their language), reads
// work, only a manager restores it, and then the change goes through.
func TestArchivedProjectIsReadOnlyUntilRestored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	editor, manager := b.as(t, studio.RoleEditor), b.as(t, studio.RoleManager)
	require.Equal(t, http.StatusSeeOther, manager.post(p+"/archive", nil, true).StatusCode)

	resp := editor.htmx(http.MethodPost, p+"/rename", url.Values{"name": {"Renamed"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, "#flash", resp.Header.Get("HX-Retarget"))
	require.Contains(t, doc(t, resp).Text(), "archived and read-only")
	zh := editor.do(http.MethodPost, p+"/rename", strings.NewReader(url.Values{"name": {"Renamed"}, "_csrf": {editor.csrf}}.Encode()),
		"application/x-www-form-urlencoded", map[string]string{"Accept-Language": "zh-CN"})
	require.Equal(t, http.StatusConflict, zh.StatusCode)
	require.Contains(t, doc(t, zh).Text(), "已归档")
	got, err := b.store.Project(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, b.project.Name, got.Name)

	require.Equal(t, http.StatusOK, editor.get(p).StatusCode)
	require.Equal(t, http.StatusOK, editor.get(p+"/lines").StatusCode)
	require.Equal(t, http.StatusForbidden, editor.post(p+"/unarchive", nil, true).StatusCode)
	require.Equal(t, http.StatusSeeOther, manager.post(p+"/unarchive", nil, true).StatusCode)
	require.Equal(t, http.StatusSeeOther, editor.post(p+"/rename", url.Values{"name": {"Renamed"}}, true).StatusCode)
	got, err = b.store.Project(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, "Renamed", got.Name)

	// An archived project can still be deleted by a manager.
	require.Equal(t, http.StatusSeeOther, manager.post(p+"/archive", nil, true).StatusCode)
	require.Equal(t, http.StatusSeeOther, manager.post(p+"/delete", url.Values{"confirm": {"Renamed"}}, true).StatusCode)
}

// TestProjectListsFollowMembership: an editor lists only their projects, active and
// archived; managers and admins list every one; a project an editor creates is theirs.
func TestProjectListsFollowMembership(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	outsider := studiotest.User(t, b.store, studio.RoleEditor)
	byManager := studiotest.Project(t, b.store, b.users[studio.RoleManager], 1)
	old := studiotest.Project(t, b.store, b.users[studio.RoleEditor], 1)
	require.NoError(t, b.store.SetProjectArchived(ctx, old.ID, true))

	names := func(c *client, path string) []string {
		var out []string
		doc(t, c.get(path)).Find(`[data-testid="project-row"] a`).Each(func(_ int, s *goquery.Selection) { out = append(out, s.Text()) })
		return out
	}
	editor, other, manager := b.as(t, studio.RoleEditor), b.asUser(t, outsider), b.as(t, studio.RoleManager)
	require.ElementsMatch(t, []string{b.project.Name}, names(editor, "/projects"))
	require.ElementsMatch(t, []string{old.Name}, names(editor, "/projects?archived=1"))
	require.Empty(t, names(other, "/projects"))
	require.Empty(t, names(other, "/projects?archived=1"))
	require.ElementsMatch(t, []string{b.project.Name, byManager.Name}, names(manager, "/projects"))
	require.ElementsMatch(t, []string{old.Name}, names(b.as(t, studio.RoleAdmin), "/projects?archived=1"))
	require.Equal(t, http.StatusNotFound, editor.get(fmt.Sprintf("/projects/%d", byManager.ID)).StatusCode)

	resp := other.post("/projects", url.Values{"name": {"Freelance job"}}, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, http.StatusOK, other.get(resp.Header.Get("Location")).StatusCode)
	require.ElementsMatch(t, []string{"Freelance job"}, names(other, "/projects"))
	require.NotContains(t, names(editor, "/projects"), "Freelance job")
}

// TestBlobsFollowTheirProject: audio served by hash is served to a member of a project
// it belongs to and to managers, and is a 404 for an editor of other projects (as an
// unknown hash is); a played range belongs to its project too.
func TestBlobsFollowTheirProject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	outsider := studiotest.User(t, b.store, studio.RoleEditor)
	ls := b.allLines(t)
	tk := takeWith(t, b, ls[0], 48000, 0, 440)
	takeWith(t, b, ls[1], 48000, 0, 660)
	editor, other, manager := b.as(t, studio.RoleEditor), b.asUser(t, outsider), b.as(t, studio.RoleManager)
	blob := "/blobs/" + tk.AudioSHA256
	require.Equal(t, http.StatusOK, editor.get(blob).StatusCode)
	require.Equal(t, http.StatusOK, manager.get(blob).StatusCode)
	require.Equal(t, http.StatusNotFound, other.get(blob).StatusCode)
	require.Equal(t, http.StatusNotFound, editor.get("/blobs/"+strings.Repeat("0", 64)).StatusCode)

	rng := editor.htmx(http.MethodPost, fmt.Sprintf("/projects/%d/lines/range", b.project.ID),
		url.Values{"line_id": {fmt.Sprint(ls[0].ID), fmt.Sprint(ls[1].ID)}})
	require.Equal(t, http.StatusOK, rng.StatusCode)
	src, ok := doc(t, rng).Find(`[data-testid="range-audio"]`).Attr("src")
	require.True(t, ok)
	require.Equal(t, http.StatusOK, editor.get(src).StatusCode)
	require.Equal(t, http.StatusNotFound, other.get(src).StatusCode)

	// Made a member, the other editor hears them; removed, no more.
	require.NoError(t, b.store.AddProjectMember(context.Background(), b.users[studio.RoleManager].ID, b.project.ID, outsider.ID))
	require.Equal(t, http.StatusOK, other.get(blob).StatusCode)
	require.NoError(t, b.store.RemoveProjectMember(context.Background(), b.users[studio.RoleManager].ID, b.project.ID, outsider.ID))
	require.Equal(t, http.StatusNotFound, other.get(blob).StatusCode)
}

// TestMembersPanel: a manager adds and removes editors on the project's settings
// (htmx swaps the panel), which lets them in and out at once and is kept in the
// history with who did it; an editor sees no panel and cannot change members; only
// enabled editors can be added.
func TestMembersPanel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	outsider := studiotest.User(t, b.store, studio.RoleEditor)
	editor, other, manager := b.as(t, studio.RoleEditor), b.asUser(t, outsider), b.as(t, studio.RoleManager)

	settings := doc(t, manager.get(p+"/settings"))
	require.Equal(t, 1, settings.Find(`[data-testid="member-row"]`).Length(), "the creator is the first member")
	require.Equal(t, 1, settings.Find(fmt.Sprintf(`[data-testid="member-form"] option[value="%d"]`, outsider.ID)).Length())
	require.Zero(t, doc(t, editor.get(p+"/settings")).Find(`[data-testid="members"]`).Length())
	require.Equal(t, http.StatusForbidden, editor.post(p+"/members", url.Values{"user_id": {fmt.Sprint(outsider.ID)}}, true).StatusCode)
	require.Equal(t, http.StatusNotFound, other.get(p).StatusCode)

	resp := manager.htmx(http.MethodPost, p+"/members", url.Values{"user_id": {fmt.Sprint(outsider.ID)}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	panel := doc(t, resp)
	require.Equal(t, 2, panel.Find(`[data-testid="member-row"]`).Length())
	require.Contains(t, panel.Find(`[data-testid="member-history"]`).Text(), b.users[studio.RoleManager].Username)
	require.Equal(t, http.StatusOK, other.get(p).StatusCode)

	for _, bad := range []string{fmt.Sprint(b.users[studio.RoleManager].ID), "999999", "x"} {
		resp = manager.htmx(http.MethodPost, p+"/members", url.Values{"user_id": {bad}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, bad)
		require.Contains(t, doc(t, resp).Find(`[data-testid="members-error"]`).Text(), "Only an enabled editor")
	}

	resp = manager.htmx(http.MethodPost, fmt.Sprintf("%s/members/%d/delete", p, outsider.ID), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, doc(t, resp).Find(`[data-testid="member-row"]`).Length())
	require.Equal(t, http.StatusNotFound, other.get(p).StatusCode)
	hist, err := b.store.ProjectMemberHistory(context.Background(), b.project.ID, 10)
	require.NoError(t, err)
	require.Len(t, hist, 3)
	require.Equal(t, "remove", hist[0].Action)
	require.Equal(t, outsider.Username, hist[0].User)
}

// ended waits for the stream to end (its events channel closes); the timeout only
// keeps a broken test from hanging.
func (s *sseStream) ended(t *testing.T, what string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("the stream was still open 20 s after %s", what)
		}
	}
}

// TestLiveStreamsEndWhenAccessEnds: an open live-update stream ends within seconds of
// its user's removal from the project, a change of their role, a logout, a disabling
// or a password reset, so that no more line text reaches them.
func TestLiveStreamsEndWhenAccessEnds(t *testing.T) {
	t.Parallel()
	b := setupLive(t)
	ctx := context.Background()
	path := fmt.Sprintf("/projects/%d/events", b.project.ID)
	mgr := b.users[studio.RoleManager].ID
	open := func(u *studio.User) (*client, *sseStream) {
		c := b.asUser(t, u)
		return c, c.stream(path, nil)
	}

	outsider := studiotest.User(t, b.store, studio.RoleEditor)
	require.NoError(t, b.store.AddProjectMember(ctx, mgr, b.project.ID, outsider.ID))
	_, s := open(outsider)
	require.NoError(t, b.store.RemoveProjectMember(ctx, mgr, b.project.ID, outsider.ID))
	s.ended(t, "the removal from the project")

	promoted := studiotest.User(t, b.store, studio.RoleManager)
	_, s = open(promoted)
	require.NoError(t, b.store.SetUserRole(ctx, promoted.ID, studio.RoleEditor))
	s.ended(t, "a role change")

	c, s := open(studiotest.User(t, b.store, studio.RoleManager))
	require.Equal(t, http.StatusSeeOther, c.post("/logout", nil, true).StatusCode)
	s.ended(t, "the logout")

	disabled := studiotest.User(t, b.store, studio.RoleManager)
	_, s = open(disabled)
	require.NoError(t, b.store.SetUserDisabled(ctx, disabled.ID, true))
	s.ended(t, "disabling the user")

	reset := studiotest.User(t, b.store, studio.RoleManager)
	_, s = open(reset)
	require.NoError(t, b.store.SetUserPassword(ctx, reset.ID, "another long password 123"))
	s.ended(t, "a password reset")
}

// TestPagesRunNoInlineScript: the CSP allows scripts from our own files only (no
// 'unsafe-inline', no 'unsafe-eval'), and no page has a script the browser would then
// refuse: every <script> has a src, and no element has an on* or hx-on attribute.
func TestPagesRunNoInlineScript(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ls := b.allLines(t)
	takeWith(t, b, ls[0], 48000, 0, 440)
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	l := fmt.Sprintf("%s/lines/%d", p, ls[0].ID)
	admin := b.as(t, studio.RoleAdmin)
	for _, path := range []string{"/projects", p, p + "/settings", p + "/characters", p + "/review", p + "/exports",
		l + "/history", l + "/takes", l + "/edit", "/dashboard", p + "/dashboard", "/admin/users", "/admin/gpus", "/login"} {
		c := admin
		if path == "/login" {
			c = b.anon(t)
		}
		resp := c.get(path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		csp := resp.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self';", path)
		require.NotContains(t, csp, "unsafe-eval", path)
		d := doc(t, resp)
		d.Find("script").Each(func(_ int, s *goquery.Selection) {
			src, ok := s.Attr("src")
			require.True(t, ok && src != "", "%s: an inline script: %s", path, s.Text())
		})
		d.Find("*").Each(func(_ int, s *goquery.Selection) {
			for _, a := range s.Nodes[0].Attr {
				require.False(t, strings.HasPrefix(a.Key, "on") || strings.HasPrefix(a.Key, "hx-on"),
					"%s: <%s %s=%q>", path, goquery.NodeName(s), a.Key, a.Val)
				require.False(t, strings.HasPrefix(strings.TrimSpace(a.Val), "js:") || strings.HasPrefix(strings.TrimSpace(a.Val), "javascript:"),
					"%s: <%s %s=%q>", path, goquery.NodeName(s), a.Key, a.Val)
			}
		})
	}
}
