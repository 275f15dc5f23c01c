package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/studio/script"
	"dubstudio/views"
)

// line loads the :pid project's :lid line.
func (s *Server) line(c echo.Context) (*studio.Line, error) {
	pid, err := paramID(c, "pid")
	if err != nil {
		return nil, err
	}
	lid, err := paramID(c, "lid")
	if err != nil {
		return nil, err
	}
	return s.store.Line(c.Request().Context(), pid, lid)
}

func (s *Server) listLines(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.projectVM(c, p)
	if err != nil {
		return err
	}
	// The filter and the pager push this URL: going back to it may be a history
	// restore, which needs the whole page.
	if wantsFragment(c) {
		return s.render(c, http.StatusOK, views.LinesTable(s.page(c, p.Name, "projects"), vm))
	}
	return s.render(c, http.StatusOK, views.ProjectPage(s.page(c, p.Name, "projects"), vm))
}

// lineViews joins lines with their characters and current takes for display.
func (s *Server) lineViews(c echo.Context, lines []studio.Line, chars []studio.Character) ([]views.LineView, error) {
	byID := make(map[int64]*studio.Character, len(chars))
	for i := range chars {
		byID[chars[i].ID] = &chars[i]
	}
	var takeIDs []int64
	for _, l := range lines {
		if l.CurrentTakeID != nil {
			takeIDs = append(takeIDs, *l.CurrentTakeID)
		}
	}
	takes, err := s.store.TakesByIDs(c.Request().Context(), takeIDs)
	if err != nil {
		return nil, err
	}
	out := make([]views.LineView, len(lines))
	for i, l := range lines {
		out[i] = views.LineView{Line: l}
		if l.CharacterID != nil {
			out[i].Character = byID[*l.CharacterID]
		}
		if l.CurrentTakeID != nil {
			if t, ok := takes[*l.CurrentTakeID]; ok {
				out[i].Take = &t
			}
		}
	}
	return out, nil
}

// LineView loads what one line's row shows.
func (s *Server) lineView(c echo.Context, l *studio.Line) (views.LineView, error) {
	chars, err := s.store.Characters(c.Request().Context(), l.ProjectID)
	if err != nil {
		return views.LineView{}, err
	}
	vs, err := s.lineViews(c, []studio.Line{*l}, chars)
	if err != nil {
		return views.LineView{}, err
	}
	return vs[0], nil
}

func (s *Server) renderRow(c echo.Context, status int, l *studio.Line) error {
	v, err := s.lineView(c, l)
	if err != nil {
		return err
	}
	return s.render(c, status, views.LineRow(s.page(c, "", ""), v))
}

func (s *Server) showLine(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	return s.renderRow(c, http.StatusOK, l)
}

func (s *Server) lineForm(c echo.Context, l *studio.Line) (views.LineForm, error) {
	chars, err := s.store.Characters(c.Request().Context(), l.ProjectID)
	if err != nil {
		return views.LineForm{}, err
	}
	f := views.LineForm{ProjectID: l.ProjectID, Line: *l, Characters: chars, Text: l.Text, Notes: l.Notes,
		Start: views.Timecode(l.StartMs), End: views.Timecode(l.EndMs), DurationLock: l.DurationLock, Errors: map[string]string{}}
	if l.CharacterID != nil {
		f.CharacterID = *l.CharacterID
	}
	if l.Emotion != nil {
		f.EmotionMode = string(l.Emotion.Mode)
		switch l.Emotion.Mode {
		case studio.EmotionText:
			f.EmotionValue = l.Emotion.Text
		case studio.EmotionVector:
			f.EmotionValue = views.FormatVector(l.Emotion.Vector)
		}
	}
	return f, nil
}

func (s *Server) editLine(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	f, err := s.lineForm(c, l)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.LineEditRow(s.page(c, "", ""), f))
}

// saveLine applies an inline edit. A stale save comes back as the form, still holding
// what the user typed, with the other person's version shown and the base revision
// moved on, so that saving again is a deliberate choice.
func (s *Server) saveLine(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	f, err := s.lineForm(c, l)
	if err != nil {
		return err
	}
	// Keep what the user typed.
	f.Text, f.Notes = c.FormValue("text"), c.FormValue("notes")
	f.Start, f.End = c.FormValue("start"), c.FormValue("end")
	f.DurationLock = c.FormValue("duration_lock") == "1"
	f.EmotionMode, f.EmotionValue = c.FormValue("emotion_mode"), c.FormValue("emotion_value")
	f.CharacterID, _ = strconv.ParseInt(c.FormValue("character_id"), 10, 64)

	base, err := strconv.Atoi(c.FormValue("base_revision"))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_request"))
	}
	edit := studio.LineEdit{BaseRevision: base, Text: &f.Text, Notes: &f.Notes, DurationLock: &f.DurationLock}
	var cid *int64
	if f.CharacterID > 0 {
		cid = &f.CharacterID
	}
	edit.CharacterID = &cid
	start, okStart := parseTimecode(f.Start)
	end, okEnd := parseTimecode(f.End)
	if !okStart {
		f.Errors["start"] = s.t(c, "line.bad_timecode")
	}
	if !okEnd {
		f.Errors["end"] = s.t(c, "line.bad_timecode")
	}
	edit.StartMs, edit.EndMs = &start, &end
	emo, emoErr := parseEmotion(f.EmotionMode, f.EmotionValue)
	if emoErr != nil {
		f.Errors["emotion"] = s.messageOf(c, 422, emoErr)
	}
	edit.Emotion = &emo
	if len(f.Errors) > 0 {
		return s.render(c, http.StatusUnprocessableEntity, views.LineEditRow(s.page(c, "", ""), f))
	}

	saved, err := s.store.UpdateLine(c.Request().Context(), currentUser(c).ID, l.ProjectID, l.ID, edit)
	var ce *studio.ConflictError
	var fe studio.FieldsError
	switch {
	case errors.As(err, &ce):
		f.Conflict = ce
		f.Line = *ce.Current
		return s.render(c, http.StatusConflict, views.LineEditRow(s.page(c, "", ""), f))
	case errors.As(err, &fe):
		for k, v := range fe {
			f.Errors[k] = v.In(langOf(c))
		}
		return s.render(c, http.StatusUnprocessableEntity, views.LineEditRow(s.page(c, "", ""), f))
	case err != nil:
		return err
	}
	c.Response().Header().Set(hxTrigger, "progress-changed")
	return s.renderRow(c, http.StatusOK, saved)
}

func parseEmotion(mode, value string) (*studio.Emotion, error) {
	if strings.HasPrefix(mode, "source:") {
		return parseSourceEmotion(mode)
	}
	switch mode {
	case "":
		return nil, nil
	case string(studio.EmotionSpeaker):
		return &studio.Emotion{Mode: studio.EmotionSpeaker}, nil
	case string(studio.EmotionVector):
		e, err := studio.ParseEmotionColumn(value)
		if err == nil && (e == nil || e.Mode != studio.EmotionVector) {
			e = &studio.Emotion{Mode: studio.EmotionVector}
			return nil, e.Validate()
		}
		return e, err
	case string(studio.EmotionText):
		e := &studio.Emotion{Mode: studio.EmotionText, Text: strings.TrimSpace(value)}
		return e, e.Validate()
	}
	e := &studio.Emotion{Mode: studio.EmotionMode(mode)}
	return nil, e.Validate()
}

// maxTimeMs is the latest start or end an edit gives a line, in the inline editor
// and on the timeline alike: an import's latest timecode, so that an imported line
// can be saved again as it is.
const maxTimeMs = int(script.MaxTimecode / time.Millisecond)

// parseTimecode reads HH:MM:SS.mmm, MM:SS.mmm or SS.mmm (comma or dot) into ms.
func parseTimecode(s string) (int, bool) {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", ".")
	if s == "" {
		return 0, false
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return 0, false
	}
	total := 0.0
	for i, p := range parts {
		last := i == len(parts)-1
		if p == "" {
			return 0, false
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v < 0 || (!last && strings.Contains(p, ".")) || (i > 0 && v >= 60) {
			return 0, false
		}
		total = total*60 + v
	}
	ms := total*1000 + 0.5
	if ms > float64(maxTimeMs) {
		return 0, false
	}
	return int(ms), true
}

func (s *Server) showLineHistory(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	entries, err := s.store.LineHistory(ctx, l.ProjectID, l.ID)
	if err != nil {
		return err
	}
	chars, err := s.store.Characters(ctx, l.ProjectID)
	if err != nil {
		return err
	}
	names := map[int64]string{}
	for _, ch := range chars {
		names[ch.ID] = ch.Name
	}
	return s.render(c, http.StatusOK, views.LineHistory(s.page(c, "", ""), l.ID, entries, names))
}

// renderLinesAfterChange re-renders the editor's table (keeping its filter) after an
// action that changes more than one row.
func (s *Server) renderLinesAfterChange(c echo.Context, p *studio.Project) error {
	vm, err := s.projectVM(c, p)
	if err != nil {
		return err
	}
	c.Response().Header().Set(hxTrigger, "progress-changed")
	return s.render(c, http.StatusOK, views.LinesTable(s.page(c, p.Name, "projects"), vm))
}

func (s *Server) assignLines(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	ids, err := s.selectedLines(c)
	if err != nil {
		return err
	}
	var cid *int64
	if v := c.FormValue("character_id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_request"))
		}
		cid = &id
	}
	ctx := c.Request().Context()
	n, err := s.store.AssignCharacter(ctx, currentUser(c).ID, p.ID, ids, cid)
	if err != nil {
		return err
	}
	vm, err := s.projectVM(c, p)
	if err != nil {
		return err
	}
	// Say what was done: the table alone looks the same when the lines assigned are
	// on another page, or were that character's already.
	switch {
	case n == 0:
		vm.Notice, vm.NoticeNeutral = s.t(c, "bulk.assigned_none"), true
	case cid == nil:
		vm.Notice = s.t(c, "bulk.unassigned", n)
	default:
		name := ""
		if ch := vm.Character(cid); ch != nil {
			name = ch.Name
		}
		vm.Notice = s.t(c, "bulk.assigned", n, name)
	}
	c.Response().Header().Set(hxTrigger, "progress-changed")
	return s.render(c, http.StatusOK, views.LinesTable(s.page(c, p.Name, "projects"), vm))
}

func (s *Server) splitLine(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	base, _ := strconv.Atoi(c.FormValue("base_revision"))
	at, _ := strconv.Atoi(c.FormValue("at"))
	_, _, err = s.store.SplitLine(c.Request().Context(), currentUser(c).ID, l.ProjectID, l.ID, base, at, 0)
	if err != nil {
		return err
	}
	p, err := s.store.Project(c.Request().Context(), l.ProjectID)
	if err != nil {
		return err
	}
	return s.renderLinesAfterChange(c, p)
}

func (s *Server) mergeLine(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	base, _ := strconv.Atoi(c.FormValue("base_revision"))
	if _, err := s.store.MergeLines(c.Request().Context(), currentUser(c).ID, l.ProjectID, l.ID, base); err != nil {
		return err
	}
	p, err := s.store.Project(c.Request().Context(), l.ProjectID)
	if err != nil {
		return err
	}
	return s.renderLinesAfterChange(c, p)
}
