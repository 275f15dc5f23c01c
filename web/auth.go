package web

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/views"
)

const (
	sessionCookie = "dubstudio_session"
	loginCSRF     = "dubstudio_login_csrf"
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "_csrf"

	ctxSession = "session"
	ctxLang    = "lang"
)

func currentSession(c echo.Context) *studio.Session {
	s, _ := c.Get(ctxSession).(*studio.Session)
	return s
}

func currentUser(c echo.Context) *studio.User {
	if s := currentSession(c); s != nil {
		return s.User
	}
	return nil
}

func langOf(c echo.Context) i18n.Lang {
	if l, ok := c.Get(ctxLang).(i18n.Lang); ok {
		return l
	}
	return i18n.EN
}

// csrfToken is the token forms and htmx must send back: the session's, or before
// login the one in the login cookie.
func csrfToken(c echo.Context) string {
	if s := currentSession(c); s != nil {
		return s.CSRFToken
	}
	if t, ok := c.Get(loginCSRF).(string); ok {
		return t
	}
	return ""
}

// loadSession finds the session of the cookie, if any, and the interface language:
// the user's choice, else the browser's preference.
func (s *Server) loadSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if strings.HasPrefix(c.Request().URL.Path, "/static/") {
			return next(c)
		}
		lang := i18n.FromAcceptLanguage(c.Request().Header.Get("Accept-Language"))
		if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" {
			sess, err := s.store.SessionByToken(c.Request().Context(), ck.Value, s.cfg.SessionTTL)
			switch {
			case err == nil:
				c.Set(ctxSession, sess)
				if l, ok := i18n.Parse(sess.User.Lang); ok {
					lang = l
				}
			case errors.Is(err, studio.ErrNotFound):
				s.clearCookie(c, sessionCookie)
			default:
				return err
			}
		}
		c.Set(ctxLang, lang)
		return next(c)
	}
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// checkCSRF refuses every unsafe request whose token does not match the session's
// (or, for the login form, the login cookie's).
func (s *Server) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if safeMethod(c.Request().Method) {
			return next(c)
		}
		if strings.HasPrefix(c.Request().URL.Path, riverUIPrefix+"/") && sameOrigin(c.Request()) {
			return next(c)
		}
		want := ""
		if sess := currentSession(c); sess != nil {
			want = sess.CSRFToken
		} else if ck, err := c.Cookie(loginCSRF); err == nil && s.validLoginToken(ck.Value) {
			want = ck.Value
		}
		got := c.Request().Header.Get(csrfHeader)
		if got == "" {
			got = formToken(c.Request())
		}
		if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
			return echo.NewHTTPError(http.StatusForbidden, s.t(c, "error.csrf")).SetInternal(errCSRF)
		}
		return next(c)
	}
}

var errCSRF = errors.New("csrf token missing or wrong")

// csrfPeekBytes is how much of a multipart body formToken reads to find the token.
const csrfPeekBytes = 64 << 10

// formToken returns the CSRF field of a form that sent no header (a form posted
// without JavaScript). A multipart body is not parsed for it, which would spool every
// file to disk before the check: only its first csrfPeekBytes are read, the token must
// be a field before any file, and what was read is put back in front of the body for
// the handler.
func formToken(r *http.Request) string {
	ct, params, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	if ct != "multipart/form-data" || r.MultipartForm != nil { // parsed already: a form without a file (limitBody)
		return r.FormValue(csrfField)
	}
	if params["boundary"] == "" || r.Body == nil {
		return ""
	}
	var read bytes.Buffer
	body := r.Body
	mr := multipart.NewReader(io.TeeReader(io.LimitReader(body, csrfPeekBytes), &read), params["boundary"])
	token := ""
	for {
		part, err := mr.NextPart()
		if err != nil || part.FileName() != "" {
			break
		}
		if part.FormName() == csrfField {
			b, _ := io.ReadAll(io.LimitReader(part, 256))
			token = string(b)
			break
		}
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(&read, body), body}
	return token
}

// requireRole sends anonymous visitors to the login page and refuses users whose role
// does not include least.
func (s *Server) requireRole(least studio.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			u := currentUser(c)
			if u == nil {
				if !safeMethod(c.Request().Method) {
					return echo.NewHTTPError(http.StatusUnauthorized, s.t(c, "login.required"))
				}
				target := "/login?next=" + url.QueryEscape(c.Request().URL.RequestURI())
				if isHTMX(c) {
					c.Response().Header().Set(hxRedirect, target)
					return c.NoContent(http.StatusUnauthorized)
				}
				return c.Redirect(http.StatusSeeOther, target)
			}
			if !u.Role.AtLeast(least) {
				return fmt.Errorf("role %s needs %s: %w", u.Role, least, studio.ErrForbidden)
			}
			return next(c)
		}
	}
}

func (s *Server) setCookie(c echo.Context, name, value string, maxAge time.Duration) {
	c.SetCookie(&http.Cookie{
		Name: name, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(s.cfg.BaseURL, "https://"), MaxAge: int(maxAge.Seconds()),
	})
}

func (s *Server) clearCookie(c echo.Context, name string) {
	c.SetCookie(&http.Cookie{Name: name, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

// loginToken is the CSRF token of the login form: a nonce and its HMAC under the
// session secret, so that a cookie planted by another site does not verify.
func (s *Server) loginToken() string {
	nonce := randomString()
	return nonce + "." + s.sign(nonce)
}

func (s *Server) validLoginToken(tok string) bool {
	nonce, sig, ok := strings.Cut(tok, ".")
	return ok && hmac.Equal([]byte(sig), []byte(s.sign(nonce)))
}

func (s *Server) sign(v string) string {
	m := hmac.New(sha256.New, []byte(s.cfg.SessionSecret))
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func randomString() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) showLogin(c echo.Context) error {
	if currentUser(c) != nil {
		return c.Redirect(http.StatusSeeOther, "/projects")
	}
	return s.renderLogin(c, http.StatusOK, "", "")
}

func (s *Server) renderLogin(c echo.Context, status int, username, msg string) error {
	// Reuse a valid token, so that two login tabs (or a reload) do not invalidate
	// each other's forms.
	var tok string
	if ck, err := c.Cookie(loginCSRF); err == nil && s.validLoginToken(ck.Value) {
		tok = ck.Value
	} else {
		tok = s.loginToken()
	}
	s.setCookie(c, loginCSRF, tok, time.Hour)
	c.Set(loginCSRF, tok)
	return s.render(c, status, views.Login(s.page(c, s.t(c, "login.title"), ""), username, msg))
}

// safeNext keeps redirects after login on this site.
// safeNext is where a login goes on: next when it is a path of this site, else the
// projects. Browsers drop tabs and newlines from URLs and read a backslash as a
// slash, so "/\t/host" or "/\\host" would leave the site: any control character or
// backslash refuses next, as does anything that parses with a scheme or a host.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") ||
		strings.IndexFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return "/projects"
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(u.Path, "//") {
		return "/projects"
	}
	return next
}

func (s *Server) login(c echo.Context) error {
	ctx := c.Request().Context()
	username := strings.TrimSpace(c.FormValue("username"))
	password := c.FormValue("password")
	ip := c.RealIP()
	if username == "" || password == "" {
		return s.renderLogin(c, http.StatusUnprocessableEntity, username, s.t(c, "login.failed"))
	}
	fails, err := s.store.LoginFailures(ctx, username, ip, time.Now().Add(-s.cfg.LoginFailWindow))
	if err != nil {
		return err
	}
	if fails >= int64(s.cfg.LoginMaxFails) {
		return s.renderLogin(c, http.StatusTooManyRequests, username, s.t(c, "login.throttled", int(s.cfg.LoginFailWindow.Minutes())))
	}
	u, err := s.store.Authenticate(ctx, username, password)
	if err != nil {
		if errors.Is(err, studio.ErrForbidden) {
			if err := s.store.RecordLoginFailure(ctx, username, ip); err != nil {
				return err
			}
			s.logger.WarnContext(ctx, "failed login", "username", username, "ip", ip)
			return s.renderLogin(c, http.StatusUnauthorized, username, s.t(c, "login.failed"))
		}
		return err
	}
	if err := s.store.ClearLoginFailures(ctx, username, ip); err != nil {
		return err
	}
	token, _, err := s.store.CreateSession(ctx, u.ID, s.cfg.SessionTTL)
	if err != nil {
		return err
	}
	s.setCookie(c, sessionCookie, token, s.cfg.SessionTTL)
	s.clearCookie(c, loginCSRF)
	return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
}

func (s *Server) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		if err := s.store.DeleteSession(c.Request().Context(), ck.Value); err != nil {
			return err
		}
	}
	s.clearCookie(c, sessionCookie)
	return c.Redirect(http.StatusSeeOther, "/login")
}

func (s *Server) setLang(c echo.Context) error {
	lang := c.FormValue("lang")
	if err := s.store.SetUserLang(c.Request().Context(), currentUser(c).ID, lang); err != nil {
		return err
	}
	back := c.Request().Referer()
	if u, err := url.Parse(back); err == nil && u.Host == c.Request().Host {
		return c.Redirect(http.StatusSeeOther, safeNext(u.RequestURI()))
	}
	return c.Redirect(http.StatusSeeOther, "/projects")
}
