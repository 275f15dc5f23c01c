package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

// hxHistoryRestore marks htmx's request for a whole page when going back in history.
const hxHistoryRestore = "HX-History-Restore-Request"

// showReview shows a line in the review view (?line=ID; the first line waiting for
// approval otherwise): the whole page, or only its panel for htmx.
func (s *Server) showReview(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	mark := s.live.Mark(p.ID) // before the line is read
	ctx := c.Request().Context()
	var l *studio.Line
	if v := c.QueryParam("line"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_request"))
		}
		l, err = s.store.Line(ctx, p.ID, id)
		if err != nil {
			return err
		}
	} else if l, err = s.store.FirstLineToReview(ctx, p.ID); err != nil {
		if errors.Is(err, studio.ErrNotFound) {
			return echo.NewHTTPError(http.StatusNotFound, s.t(c, "lines.none"))
		}
		return err
	}
	vm, err := s.reviewVM(c, p, l)
	if err != nil {
		return err
	}
	vm.LiveMark = mark
	return s.renderReview(c, http.StatusOK, vm)
}

// renderReview answers with the review panel for htmx, the whole page otherwise.
func (s *Server) renderReview(c echo.Context, status int, vm views.ReviewVM) error {
	page := s.page(c, s.t(c, "review.title")+" · "+vm.Project.Name, "projects")
	if wantsFragment(c) {
		return s.render(c, status, views.ReviewPanel(page, vm))
	}
	src := views.SourceVM{Project: vm.Project, Source: vm.Source, LimitMB: s.cfg.SourceMaxUploadBytes >> 20}
	return s.render(c, status, views.ReviewPage(page, vm, src))
}

// reviewVM loads what the review view shows about line l.
func (s *Server) reviewVM(c echo.Context, p *studio.Project, l *studio.Line) (views.ReviewVM, error) {
	ctx := c.Request().Context()
	vm := views.ReviewVM{Project: *p, CommentErrors: map[int64]string{}, CommentDrafts: map[int64]string{}}
	var err error
	if vm.Row, err = s.lineView(c, l); err != nil {
		return vm, err
	}
	if vm.Place, err = s.store.LinePlace(ctx, p.ID, l.Idx); err != nil {
		return vm, err
	}
	for _, id := range []*int64{vm.Place.Prev, &l.ID, vm.Place.Next} {
		if id != nil {
			vm.Context = append(vm.Context, *id)
		}
	}
	takes, err := s.store.Takes(ctx, p.ID, l.ID)
	if err != nil {
		return vm, err
	}
	if vm.History, err = s.store.ReviewHistory(ctx, p.ID, l.ID); err != nil {
		return vm, err
	}
	comments := map[int64][]studio.TakeReview{}
	for _, h := range vm.History {
		if h.Action == studio.ReviewComment && h.TakeID != nil {
			comments[*h.TakeID] = append(comments[*h.TakeID], h)
		}
	}
	number := make(map[int64]int, len(takes)) // takes come newest first; the first is 1
	for i, t := range takes {
		number[t.ID] = len(takes) - i
	}
	for _, t := range takes {
		rt := views.ReviewTake{Take: t, Number: number[t.ID], Comments: comments[t.ID],
			Current:  l.CurrentTakeID != nil && *l.CurrentTakeID == t.ID,
			Approved: l.ApprovedTakeID != nil && *l.ApprovedTakeID == t.ID}
		if t.RefitOf != nil {
			rt.RefitOf = number[*t.RefitOf]
		}
		rt.SpeechStartMs, rt.SpeechEndMs = s.media.SpeechBounds(t)
		vm.Takes = append(vm.Takes, rt)
	}
	vm.SameAgain = s.sameAgain(c, l, vm.Row.Character, takes)
	src, err := s.store.ProjectSource(ctx, p.ID)
	switch {
	case err == nil:
		vm.Source = src
	case !errors.Is(err, studio.ErrNotFound):
		return vm, err
	}
	return vm, nil
}

// sameAgain says why a new take of l would be the same as its newest one (takes,
// newest first), or "" when it could differ: the engine that made the newest take
// is deterministic (a new seed changes nothing) and nothing it reads changed since,
// neither the line's audible fields nor its character.
func (s *Server) sameAgain(c echo.Context, l *studio.Line, ch *studio.Character, takes []studio.Take) string {
	if len(takes) == 0 {
		return ""
	}
	t := takes[0]
	if !t.Deterministic || t.Revision < l.AudibleRevision || (ch != nil && ch.UpdatedAt.After(t.CreatedAt)) {
		return ""
	}
	return s.t(c, "review.same_again", t.Engine)
}

// confirmed reports whether an approval of t may go ahead: a take that needs review
// is approved only with the answer to the question its button asks.
func confirmed(c echo.Context, t *studio.Take) bool {
	return !t.NeedsReview || c.FormValue("confirm") == views.ConfirmNeedsReview
}

// reviewAfter answers an action with the review panel of the line it changed; edit,
// when given, adds to the view (a notice, an error, a refused comment).
func (s *Server) reviewAfter(c echo.Context, projectID, lineID int64, status int, edit func(vm *views.ReviewVM)) error {
	ctx := c.Request().Context()
	p, err := s.store.Project(ctx, projectID)
	if err != nil {
		return err
	}
	l, err := s.store.Line(ctx, projectID, lineID)
	if err != nil {
		return err
	}
	vm, err := s.reviewVM(c, p, l)
	if err != nil {
		return err
	}
	if edit != nil {
		edit(&vm)
	}
	c.Response().Header().Set(hxTrigger, "progress-changed")
	return s.renderReview(c, status, vm)
}

// approveReviewTake approves a take from the review view.
func (s *Server) approveReviewTake(c echo.Context) error {
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
	return s.reviewAfter(c, t.ProjectID, t.LineID, http.StatusOK, nil)
}

// useReviewTake goes back to an earlier take from the review view.
func (s *Server) useReviewTake(c echo.Context) error {
	t, err := s.take(c)
	if err != nil {
		return err
	}
	if _, err := s.store.UseTakeAs(c.Request().Context(), currentUser(c).ID, t.ProjectID, t.ID); err != nil {
		return err
	}
	return s.reviewAfter(c, t.ProjectID, t.LineID, http.StatusOK, nil)
}

// commentTake adds a comment to a take; a refused comment comes back in its form.
func (s *Server) commentTake(c echo.Context) error {
	t, err := s.take(c)
	if err != nil {
		return err
	}
	body := c.FormValue("body")
	_, err = s.store.CommentTake(c.Request().Context(), currentUser(c).ID, t.ProjectID, t.ID, body)
	var fe studio.FieldsError
	if errors.As(err, &fe) {
		return s.reviewAfter(c, t.ProjectID, t.LineID, http.StatusUnprocessableEntity, func(vm *views.ReviewVM) {
			vm.CommentErrors[t.ID] = s.messageOf(c, http.StatusUnprocessableEntity, err)
			vm.CommentDrafts[t.ID] = body
		})
	}
	if err != nil {
		return err
	}
	return s.reviewAfter(c, t.ProjectID, t.LineID, http.StatusOK, nil)
}

// regenerateReviewLine asks for a new take of a line from the review view.
// A line whose new take could not differ is refused, with the reason.
func (s *Server) regenerateReviewLine(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	takes, err := s.store.Takes(ctx, l.ProjectID, l.ID)
	if err != nil {
		return err
	}
	var ch *studio.Character
	if l.CharacterID != nil {
		if ch, err = s.store.Character(ctx, l.ProjectID, *l.CharacterID); err != nil {
			return err
		}
	}
	if why := s.sameAgain(c, l, ch, takes); why != "" {
		return echo.NewHTTPError(http.StatusConflict, why)
	}
	if err := s.needRenderer(); err != nil {
		return err
	}
	n, err := s.renderer.RenderLines(ctx, l.ProjectID, []int64{l.ID})
	if err != nil {
		return err
	}
	if n > 0 {
		if err := s.store.RecordReview(ctx, currentUser(c).ID, l.ProjectID, l.ID, nil, studio.ReviewRegenerate); err != nil {
			return err
		}
	}
	return s.reviewAfter(c, l.ProjectID, l.ID, http.StatusOK, nil)
}

// reviewStatus is polled by the review panel while its line renders: once the line
// is no longer queued or rendering, it asks the panel to reload (with the new take).
func (s *Server) reviewStatus(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	if !l.State.Active() {
		c.Response().Header().Set(hxTrigger, "review-refresh")
	}
	return c.NoContent(http.StatusNoContent)
}

// approveCurrentTake approves a line's current take from the script (the a key) and
// answers with the line's row.
func (s *Server) approveCurrentTake(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	if l.CurrentTakeID == nil {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "review.no_take"))
	}
	ctx := c.Request().Context()
	ts, err := s.store.TakesByIDs(ctx, []int64{*l.CurrentTakeID})
	if err != nil {
		return err
	}
	if t, ok := ts[*l.CurrentTakeID]; ok && !confirmed(c, &t) {
		return echo.NewHTTPError(http.StatusConflict, s.t(c, "review.approve_unconfirmed"))
	}
	if _, err := s.store.ApproveTakeAs(ctx, currentUser(c).ID, l.ProjectID, *l.CurrentTakeID); err != nil {
		return err
	}
	if l, err = s.store.Line(ctx, l.ProjectID, l.ID); err != nil {
		return err
	}
	return s.renderRow(c, http.StatusOK, l)
}

// playRange plays the selected lines as they will sound on the timeline (each line's
// take at its timecode, silence between, as the export places it), mixed by media.
func (s *Server) playRange(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	ids, err := s.selectedLines(c)
	if err != nil {
		return err
	}
	mix, err := s.media.RangeMix(c.Request().Context(), p.ID, ids)
	if err != nil {
		return err
	}
	if err := s.store.LinkProjectBlob(c.Request().Context(), p.ID, mix.Blob.SHA256); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.RangePlayer(s.page(c, "", ""), mix.FirstIdx, mix.LastIdx, mix.StartMs, mix.EndMs, mix.Blob.SHA256))
}
