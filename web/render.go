package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

// Renderer queues and cancels renders (the workflow pipeline).
type Renderer interface {
	RenderPending(ctx context.Context, projectID int64) (int, error)
	RenderLines(ctx context.Context, projectID int64, lineIDs []int64) (int, error)
	RetryFailed(ctx context.Context, projectID int64) (int, error)
	Cancel(ctx context.Context, projectID int64) (int, error)
	PauseSynthesis(ctx context.Context) error
	ResumeSynthesis(ctx context.Context) error
	SynthesisPaused(ctx context.Context) (bool, error)
}

func (s *Server) needRenderer() error {
	if s.renderer == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable)
	}
	return nil
}

// afterRender answers a project-wide render action: the table again for htmx (rows
// then update live), a redirect otherwise. err is what the action returned: nil, or
// the lines it refused (studio.RenderRefusedError), said after the count of the others;
// any other error is returned as it is.
func (s *Server) afterRender(c echo.Context, p *studio.Project, n int, err error, key string) error {
	var refused *studio.RenderRefusedError
	if err != nil && !errors.As(err, &refused) {
		return err
	}
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/projects/"+strconv.FormatInt(p.ID, 10))
	}
	c.Response().Header().Set(hxTrigger, "progress-changed")
	vm, err := s.projectVM(c, p)
	if err != nil {
		return err
	}
	switch {
	case refused != nil: // not all done: said without the success colour
		vm.Notice, vm.NoticeNeutral = refused.In(langOf(c)), true
		if n > 0 {
			vm.Notice = s.t(c, key, n) + " " + vm.Notice
		}
	case n == 0: // nothing changed: said without the success colour
		vm.Notice, vm.NoticeNeutral = s.t(c, key+"_none"), true
	case n == 1:
		vm.Notice = s.t(c, key+"_one")
	default:
		vm.Notice = s.t(c, key, n)
	}
	return s.render(c, http.StatusOK, views.LinesTable(s.page(c, p.Name, "projects"), vm))
}

func (s *Server) projectAction(c echo.Context, do func(ctx context.Context, projectID int64) (int, error), key string) error {
	if err := s.needRenderer(); err != nil {
		return err
	}
	p, err := s.project(c)
	if err != nil {
		return err
	}
	n, err := do(c.Request().Context(), p.ID)
	return s.afterRender(c, p, n, err, key)
}

func (s *Server) renderPending(c echo.Context) error {
	if err := s.needRenderer(); err != nil {
		return err
	}
	return s.projectAction(c, s.renderer.RenderPending, "render.queued")
}

func (s *Server) retryFailed(c echo.Context) error {
	if err := s.needRenderer(); err != nil {
		return err
	}
	return s.projectAction(c, s.renderer.RetryFailed, "render.queued")
}

func (s *Server) cancelRender(c echo.Context) error {
	if err := s.needRenderer(); err != nil {
		return err
	}
	return s.projectAction(c, s.renderer.Cancel, "render.cancelled")
}

func (s *Server) renderSelected(c echo.Context) error {
	if err := s.needRenderer(); err != nil {
		return err
	}
	p, err := s.project(c)
	if err != nil {
		return err
	}
	ids, err := s.selectedLines(c)
	if err != nil {
		return err
	}
	n, err := s.renderer.RenderLines(c.Request().Context(), p.ID, ids)
	return s.afterRender(c, p, n, err, "render.queued")
}

// renderLine renders (or regenerates) one line and answers with its row.
func (s *Server) renderLine(c echo.Context) error {
	if err := s.needRenderer(); err != nil {
		return err
	}
	l, err := s.line(c)
	if err != nil {
		return err
	}
	if _, err := s.renderer.RenderLines(c.Request().Context(), l.ProjectID, []int64{l.ID}); err != nil {
		return err
	}
	if l, err = s.store.Line(c.Request().Context(), l.ProjectID, l.ID); err != nil {
		return err
	}
	c.Response().Header().Set(hxTrigger, "progress-changed")
	return s.renderRow(c, http.StatusOK, l)
}

func (s *Server) showTakes(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	takes, err := s.store.Takes(c.Request().Context(), l.ProjectID, l.ID)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.TakesPanel(s.page(c, "", ""), *l, takes))
}

func (s *Server) take(c echo.Context) (*studio.Take, error) {
	pid, err := paramID(c, "pid")
	if err != nil {
		return nil, err
	}
	tid, err := paramID(c, "tid")
	if err != nil {
		return nil, err
	}
	return s.store.Take(c.Request().Context(), pid, tid)
}

func (s *Server) approveTake(c echo.Context) error {
	t, err := s.take(c)
	if err != nil {
		return err
	}
	if !confirmed(c, t) {
		return echo.NewHTTPError(http.StatusConflict, s.t(c, "review.approve_unconfirmed"))
	}
	if _, err := s.store.ApproveTakeAs(c.Request().Context(), currentUser(c).ID, t.ProjectID, t.ID); err != nil {
		return err
	}
	return s.renderTakesAfter(c, t)
}

func (s *Server) useTake(c echo.Context) error {
	t, err := s.take(c)
	if err != nil {
		return err
	}
	if _, err := s.store.UseTakeAs(c.Request().Context(), currentUser(c).ID, t.ProjectID, t.ID); err != nil {
		return err
	}
	return s.renderTakesAfter(c, t)
}

func (s *Server) renderTakesAfter(c echo.Context, t *studio.Take) error {
	ctx := c.Request().Context()
	l, err := s.store.Line(ctx, t.ProjectID, t.LineID)
	if err != nil {
		return err
	}
	takes, err := s.store.Takes(ctx, t.ProjectID, t.LineID)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.TakesPanel(s.page(c, "", ""), *l, takes))
}

func (s *Server) showFailed(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	page, err := s.store.Lines(c.Request().Context(), p.ID, studio.LineFilter{State: studio.StateFailed, PerPage: 500})
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.FailedPage(s.page(c, p.Name, "projects"), *p, page.Lines, int(page.Total)))
}

func (s *Server) pauseQueue(c echo.Context) error {
	if err := s.needRenderer(); err != nil {
		return err
	}
	if err := s.renderer.PauseSynthesis(c.Request().Context()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/workers")
}

func (s *Server) resumeQueue(c echo.Context) error {
	if err := s.needRenderer(); err != nil {
		return err
	}
	if err := s.renderer.ResumeSynthesis(c.Request().Context()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/workers")
}

func (s *Server) listWorkers(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := s.store.Workers(ctx)
	if err != nil {
		return err
	}
	paused := false
	if s.renderer != nil {
		if paused, err = s.renderer.SynthesisPaused(ctx); err != nil {
			return err
		}
	}
	gc, err := s.store.LastBlobGCRun(ctx)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.WorkersPage(s.page(c, s.t(c, "workers.title"), "workers"), ws, paused, gc))
}

// maxSelectedLines is the most lines a bulk form may select. Each id is a bind
// parameter of the store's queries, and PostgreSQL takes at most 65,535 in one
// statement (past it, a 500); Go's own cap on a form's fields is a GODEBUG setting,
// not a promise. The forms select at most one page of lines (500 at most,
// studio.Store.Lines).
const maxSelectedLines = 5000

// selectedLines reads the line_id values of a bulk form, each once.
func (s *Server) selectedLines(c echo.Context) ([]int64, error) {
	form, err := c.FormParams()
	if err != nil {
		return nil, echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_request"))
	}
	var ids []int64
	seen := map[int64]bool{}
	for _, v := range form["line_id"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_request"))
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "bulk.none_selected"))
	}
	if len(ids) > maxSelectedLines {
		return nil, echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "bulk.too_many", len(ids), maxSelectedLines))
	}
	return ids, nil
}
