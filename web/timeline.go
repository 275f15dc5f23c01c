package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

// timelineRoutes are the editor's timeline under the picture (docs/picture.md): the
// tracks, and a clip's slot changed by a drag or a nudge.
func (s *Server) timelineRoutes(editor *echo.Group) {
	editor.GET("/projects/:pid/timeline", s.showTimeline)
	editor.POST("/projects/:pid/lines/:lid/slot", s.saveSlot)
}

// timelineVM lays a project's lines out by character, the first TIMELINE_MAX_LINES
// of them, each with its current take's peaks.
func (s *Server) timelineVM(c echo.Context, p *studio.Project) (views.TimelineVM, error) {
	ctx := c.Request().Context()
	vm := views.TimelineVM{Project: *p, MaxLines: s.timelineMaxLines()}
	lines, err := s.store.AllLines(ctx, p.ID)
	if err != nil {
		return vm, err
	}
	if len(lines) > vm.MaxLines {
		vm.Omitted = len(lines) - vm.MaxLines
		lines = lines[:vm.MaxLines]
	}
	chars, err := s.store.Characters(ctx, p.ID)
	if err != nil {
		return vm, err
	}
	if v, err := s.store.ProjectVideo(ctx, p.ID); err == nil {
		vm.DurationMs = v.DurationMs
		vm.FrameMs = v.FrameMs()
	} else if !errors.Is(err, studio.ErrNotFound) {
		return vm, err
	}
	rows, err := s.lineViews(c, lines, chars)
	if err != nil {
		return vm, err
	}
	// Tracks in the characters' order, then the lines without a character.
	track := map[int64]int{}
	for i := range chars {
		track[chars[i].ID] = len(vm.Tracks)
		vm.Tracks = append(vm.Tracks, views.TimelineTrack{Character: &chars[i]})
	}
	noChar := -1
	for _, r := range rows {
		vm.DurationMs = max(vm.DurationMs, r.Line.EndMs)
		i := noChar
		if r.Line.CharacterID != nil {
			i = track[*r.Line.CharacterID]
		} else if noChar < 0 {
			noChar = len(vm.Tracks)
			i = noChar
			vm.Tracks = append(vm.Tracks, views.TimelineTrack{})
		}
		clip, err := s.timelineClip(r)
		if err != nil {
			return vm, err
		}
		vm.Tracks[i].Clips = append(vm.Tracks[i].Clips, clip)
	}
	// A character without lines has no track.
	kept := vm.Tracks[:0]
	for _, t := range vm.Tracks {
		if len(t.Clips) > 0 {
			kept = append(kept, t)
		}
	}
	vm.Tracks = kept
	return vm, nil
}

func (s *Server) timelineMaxLines() int {
	if s.cfg.TimelineMaxLines > 0 {
		return s.cfg.TimelineMaxLines
	}
	return 2000
}

// timelineClip is a line with its take's waveform. A take whose audio cannot be read
// is drawn without one (logged), rather than failing the whole timeline.
func (s *Server) timelineClip(r views.LineView) (views.TimelineClip, error) {
	clip := views.TimelineClip{Line: r.Line, Take: r.Take}
	if r.Take == nil {
		return clip, nil
	}
	peaks, err := s.media.TakePeaks(r.Take.AudioSHA256)
	if err != nil {
		s.logger.Warn("timeline: no waveform for a take", "take", r.Take.ID, "err", err)
		return clip, nil
	}
	clip.Peaks = peaks
	return clip, nil
}

func (s *Server) showTimeline(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.timelineVM(c, p)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.Timeline(s.page(c, "", ""), vm))
}

// saveSlot moves a line's slot (start_ms, end_ms) from the timeline, as an edit of
// its start and end: the same revision check (a stale base_revision is a 409 with the
// usual conflict message and the clip as it now is), history and re-render rules
// (web.saveLine, studio.UpdateLine). A line moved with its length kept keeps its
// take where the take still fits (studio.Moved); a line that had a take and lost it
// to the change is queued again, so that its clip soon plays a take fitted to the
// new slot. It answers with the clip, re-read from the database, and the timeline's
// notice out of band.
func (s *Server) saveSlot(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	base, errBase := strconv.Atoi(c.FormValue("base_revision"))
	start, errStart := strconv.Atoi(c.FormValue("start_ms"))
	end, errEnd := strconv.Atoi(c.FormValue("end_ms"))
	if errBase != nil || errStart != nil || errEnd != nil || start < 0 || end < start {
		return s.slotAnswer(c, http.StatusUnprocessableEntity, l, "error", s.t(c, "timeline.bad_slot"))
	}
	if end > maxTimeMs {
		return s.slotAnswer(c, http.StatusUnprocessableEntity, l, "error", s.t(c, "timeline.slot_too_late", views.Timecode(maxTimeMs)))
	}
	ctx := c.Request().Context()
	saved, err := s.store.UpdateLine(ctx, currentUser(c).ID, l.ProjectID, l.ID, studio.LineEdit{BaseRevision: base, StartMs: &start, EndMs: &end})
	var ce *studio.ConflictError
	var fe studio.FieldsError
	switch {
	case errors.As(err, &ce):
		return s.slotAnswer(c, http.StatusConflict, ce.Current, "warn", s.t(c, "line.conflict_slot", conflictName(ce)))
	case errors.As(err, &fe):
		return s.slotAnswer(c, http.StatusUnprocessableEntity, l, "error", firstField(c, fe))
	case err != nil:
		return err
	}
	moved := saved.StartMs != l.StartMs || saved.EndMs != l.EndMs
	// A move (studio.Moved: the same length) keeps the take; where its tail no longer
	// fits before the next line, the store's GapsChanged hook has set the line
	// fitting again (refit), read back here. Any other change made the take stale.
	kept := moved && l.CurrentTakeID != nil && !saved.LatestChangeAudible()
	if kept {
		if saved, err = s.store.Line(ctx, l.ProjectID, l.ID); err != nil {
			return err
		}
	}
	// The hook fitted it again, or rendered it again where no raw audio was kept.
	redone := kept && saved.RenderSeq != l.RenderSeq
	if moved && !kept && l.CurrentTakeID != nil && !saved.State.Active() && s.renderer != nil {
		if _, err := s.renderer.RenderLines(ctx, l.ProjectID, []int64{l.ID}); err != nil {
			return err
		}
		if saved, err = s.store.Line(ctx, l.ProjectID, l.ID); err != nil {
			return err
		}
	}
	c.Response().Header().Set(hxTrigger, "progress-changed")
	msg := ""
	switch {
	case redone && saved.State == studio.StateFitting:
		msg = s.t(c, "timeline.moved_refit", saved.Idx, views.Timecode(saved.StartMs), views.Timecode(saved.EndMs))
	case kept && !redone:
		msg = s.t(c, "timeline.moved_kept", saved.Idx, views.Timecode(saved.StartMs), views.Timecode(saved.EndMs))
	case moved:
		msg = s.t(c, "timeline.moved", saved.Idx, views.Timecode(saved.StartMs), views.Timecode(saved.EndMs))
	}
	return s.slotAnswer(c, http.StatusOK, saved, "ok", msg)
}

// conflictName is who saved the line in the meantime, as the line editor says it.
func conflictName(ce *studio.ConflictError) string {
	if ce.By != nil {
		return ce.By.Name()
	}
	return "?"
}

// slotAnswer is the clip of l (with its take's waveform) and the notice.
func (s *Server) slotAnswer(c echo.Context, status int, l *studio.Line, kind, msg string) error {
	v, err := s.lineView(c, l)
	if err != nil {
		return err
	}
	clip, err := s.timelineClip(v)
	if err != nil {
		return err
	}
	page := s.page(c, "", "")
	return s.render(c, status, views.TimelineSlotAnswer(page, clip, kind, msg))
}

// firstField is the message of a refused edit's field (a slot has one: its timing).
func firstField(c echo.Context, fe studio.FieldsError) string {
	for _, k := range []string{"end", "start"} {
		if v, ok := fe[k]; ok {
			return v.In(langOf(c))
		}
	}
	for _, v := range fe {
		return v.In(langOf(c))
	}
	return ""
}
