package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/labstack/echo/v4"

	"dubstudio/audio"
	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/views"
)

// statusOf maps the domain's category sentinels to HTTP statuses, in one place. A
// full disk (met while storing audio) is the server's fault, but worth telling the
// user: it has a status of its own.
func statusOf(err error) int {
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		return he.Code
	case errors.Is(err, audio.ErrNoSpace):
		return http.StatusInsufficientStorage
	case studio.IsBadText(err):
		return http.StatusBadRequest
	case errors.Is(err, studio.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, studio.ErrInvalid):
		return http.StatusUnprocessableEntity
	case errors.Is(err, studio.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, studio.ErrConflict):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// messageOf is the text a user sees for err.
func (s *Server) messageOf(c echo.Context, status int, err error) string {
	var ie *i18n.Error
	var he *echo.HTTPError
	var fe studio.FieldsError
	var re *studio.RenderRefusedError
	switch {
	case errors.As(err, &fe):
		for _, v := range fe {
			return v.In(langOf(c))
		}
	case errors.As(err, &re):
		return re.In(langOf(c))
	case errors.As(err, &ie):
		return ie.In(langOf(c))
	case errors.As(err, &he):
		// A message of our own is shown; echo's default ("Not Found") gives way to the
		// catalog's, so that every error page words it one way, in the user's language.
		if m, ok := he.Message.(string); ok && status < 500 && m != http.StatusText(he.Code) {
			return m
		}
	}
	switch status {
	case http.StatusNotFound:
		return s.t(c, "error.not_found")
	case http.StatusForbidden:
		return s.t(c, "error.forbidden")
	case http.StatusConflict:
		return s.t(c, "error.conflict")
	case http.StatusRequestEntityTooLarge:
		return s.t(c, "error.too_large", s.cfg.MaxUploadBytes>>20)
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
		if studio.IsBadText(err) {
			return s.t(c, "error.bad_text")
		}
		return s.t(c, "error.bad_request")
	}
	return s.t(c, "error.internal")
}

// refusal returns the status and the message of err when it refuses the request
// (bad input, a conflict, something gone: any status below 500), for a handler that
// shows it in place, in the form that was sent; ok is false for a server error, which
// the handler returns for handleError to render and log.
func (s *Server) refusal(c echo.Context, err error) (status int, msg string, ok bool) {
	status = statusOf(err)
	if status >= 500 {
		return status, "", false
	}
	return status, s.messageOf(c, status, err), true
}

// handleError renders every error once: a page for normal requests, a message swapped
// into #flash for htmx. Server errors are logged with the request.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed || errors.Is(err, context.Canceled) {
		return
	}
	status := statusOf(err)
	if status >= 500 {
		s.logger.ErrorContext(c.Request().Context(), "request failed", "method", c.Request().Method,
			"path", c.Request().URL.Path, "err", err)
	}
	msg := s.messageOf(c, status, err)
	if isHTMX(c) {
		c.Response().Header().Set(hxRetarget, "#flash")
		c.Response().Header().Set(hxReswap, "innerHTML")
		_ = s.render(c, status, views.FlashMessage("error", msg))
		return
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = s.render(c, status, views.ErrorPage(s.page(c, fmt.Sprint(status), ""), status, msg))
}

func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler { //nolint:errorlint // recover gives the value panic was called with, never a wrapped error
					panic(r)
				}
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		return next(c)
	}
}

func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'")
		return next(c)
	}
}
