package web

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

func paramID(c echo.Context, name string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, echo.NewHTTPError(http.StatusNotFound)
	}
	return id, nil
}

// project is the :pid project, as projectAccess loaded it for the user. A route that
// projectAccess did not run for finds none (404): membership is never skipped.
func (s *Server) project(c echo.Context) (*studio.Project, error) {
	if p, ok := c.Get(ctxProject).(*studio.Project); ok {
		return p, nil
	}
	return nil, echo.NewHTTPError(http.StatusNotFound)
}

func (s *Server) listProjects(c echo.Context) error {
	ctx := c.Request().Context()
	archived := c.QueryParam("archived") == "1"
	ps, err := s.store.Projects(ctx, projectsOpts(c, archived))
	if err != nil {
		return err
	}
	rows, err := s.projectRows(c, ps)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.Projects(s.page(c, s.t(c, "projects.title"), "projects"), rows, archived, views.ProjectForm{}))
}

func (s *Server) projectRows(c echo.Context, ps []studio.Project) ([]views.ProjectRow, error) {
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	counts, err := s.store.ProjectStateCounts(c.Request().Context(), ids)
	if err != nil {
		return nil, err
	}
	rows := make([]views.ProjectRow, len(ps))
	for i, p := range ps {
		rows[i] = views.ProjectRow{Project: p, Counts: counts[p.ID]}
	}
	return rows, nil
}

func (s *Server) createProject(c echo.Context) error {
	name := c.FormValue("name")
	p, err := s.store.CreateProject(c.Request().Context(), name, &currentUser(c).ID)
	if err != nil {
		if errors.Is(err, studio.ErrInvalid) {
			return s.render(c, http.StatusUnprocessableEntity, views.NewProjectForm(s.page(c, "", ""),
				views.ProjectForm{Name: name, NameErr: s.messageOf(c, 422, err)}))
		}
		return err
	}
	target := "/projects/" + strconv.FormatInt(p.ID, 10)
	if isHTMX(c) {
		c.Response().Header().Set(hxRedirect, target)
		return c.NoContent(http.StatusCreated)
	}
	return c.Redirect(http.StatusSeeOther, target)
}

func (s *Server) showProject(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.projectVM(c, p)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.ProjectPage(s.page(c, p.Name, "projects"), vm))
}

// lineFilter reads the editor's filter from the query (or form, for POSTs).
func lineFilter(c echo.Context) studio.LineFilter {
	f := studio.LineFilter{Query: c.FormValue("q")}
	if st, ok := studio.ParseLineState(c.FormValue("state")); ok {
		f.State = st
	}
	f.CharacterID, _ = strconv.ParseInt(c.FormValue("character"), 10, 64)
	f.Page, _ = strconv.Atoi(c.FormValue("page"))
	return f
}

func (s *Server) projectVM(c echo.Context, p *studio.Project) (views.ProjectVM, error) {
	ctx := c.Request().Context()
	vm := views.ProjectVM{Project: *p, Filter: lineFilter(c), LiveMark: s.live.Mark(p.ID)}
	var err error
	if vm.Characters, err = s.store.Characters(ctx, p.ID); err != nil {
		return vm, err
	}
	if vm.Lines, err = s.store.Lines(ctx, p.ID, vm.Filter); err != nil {
		return vm, err
	}
	// A page past the last (its lines left the filter after an action on them, or
	// the URL says so) is the last page there is, not an empty "page 3 of 2".
	if last := vm.Lines.Pages(); vm.Lines.Total > 0 && vm.Lines.Page > last {
		vm.Filter.Page = last
		if vm.Lines, err = s.store.Lines(ctx, p.ID, vm.Filter); err != nil {
			return vm, err
		}
	}
	if vm.Rows, err = s.lineViews(c, vm.Lines.Lines, vm.Characters); err != nil {
		return vm, err
	}
	if s.renderer != nil {
		if vm.Paused, err = s.renderer.SynthesisPaused(ctx); err != nil {
			return vm, err
		}
	}
	counts, err := s.store.ProjectStateCounts(ctx, []int64{p.ID})
	vm.Counts = counts[p.ID]
	return vm, err
}

// settingsVM builds the settings page with the project's current values.
func (s *Server) settingsVM(c echo.Context, p *studio.Project) (views.SettingsVM, error) {
	g, err := s.store.Glossary(c.Request().Context(), p.ID)
	f := p.FitSettings()
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	vm := views.SettingsVM{Project: *p, Form: views.ProjectForm{Name: p.Name}, Glossary: g, Errors: map[string]string{},
		Fit: views.FitForm{StretchMin: num(f.StretchMin), StretchMax: num(f.StretchMax), GapBorrowMs: strconv.Itoa(f.GapBorrowMs),
			LoudnessLUFS: num(f.LoudnessLUFS), MaxSpeedStep: num(f.MaxSpeedStep)}}
	if err == nil && currentUser(c).SeesEveryProject() {
		var m views.MembersVM
		m, err = s.membersVM(c, p)
		vm.Members = &m
	}
	return vm, err
}

func (s *Server) renderSettings(c echo.Context, status int, vm views.SettingsVM) error {
	return s.render(c, status, views.ProjectSettings(s.page(c, vm.Project.Name, "projects"), vm))
}

func (s *Server) showProjectSettings(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.settingsVM(c, p)
	if err != nil {
		return err
	}
	vm.Fit.Saved = c.QueryParam("saved") == "fit"
	if c.QueryParam("delete") == "wrong" {
		vm.Form.DeleteErr = s.t(c, "project.delete_confirm_wrong")
	}
	return s.renderSettings(c, http.StatusOK, vm)
}

func (s *Server) saveFitSettings(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.settingsVM(c, p)
	if err != nil {
		return err
	}
	vm.Fit = views.FitForm{StretchMin: c.FormValue("stretch_min"), StretchMax: c.FormValue("stretch_max"),
		GapBorrowMs: c.FormValue("gap_borrow_ms"), LoudnessLUFS: c.FormValue("loudness_lufs"), MaxSpeedStep: c.FormValue("max_speed_step")}
	var f studio.FitSettings
	parse := func(field, v string, dst *float64) {
		// NaN and the infinities, which ParseFloat reads ("NaN", "inf"), are no
		// numbers to type here (the range checks refuse them too).
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			vm.Errors[field] = s.t(c, "form.not_a_number")
		}
		*dst = x
	}
	parse("stretch_min", vm.Fit.StretchMin, &f.StretchMin)
	parse("stretch_max", vm.Fit.StretchMax, &f.StretchMax)
	parse("loudness_lufs", vm.Fit.LoudnessLUFS, &f.LoudnessLUFS)
	parse("max_speed_step", vm.Fit.MaxSpeedStep, &f.MaxSpeedStep)
	var gap float64
	parse("gap_borrow_ms", vm.Fit.GapBorrowMs, &gap)
	f.GapBorrowMs = int(gap)
	if len(vm.Errors) == 0 {
		err = s.store.SetFitSettings(c.Request().Context(), p.ID, f)
		if err == nil {
			return c.Redirect(http.StatusSeeOther, "/projects/"+c.Param("pid")+"/settings?saved=fit")
		}
		if !s.fieldErrors(c, err, vm.Errors) {
			return err
		}
	}
	return s.renderSettings(c, http.StatusUnprocessableEntity, vm)
}

func (s *Server) addGlossaryEntry(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	term, spoken := c.FormValue("term"), c.FormValue("spoken")
	err = s.store.AddGlossaryEntry(c.Request().Context(), p.ID, term, spoken)
	if err == nil {
		return c.Redirect(http.StatusSeeOther, "/projects/"+c.Param("pid")+"/settings#glossary")
	}
	vm, verr := s.settingsVM(c, p)
	if verr != nil {
		return verr
	}
	vm.Term, vm.Spoken = term, spoken
	if !s.fieldErrors(c, err, vm.Errors) {
		return err
	}
	return s.renderSettings(c, http.StatusUnprocessableEntity, vm)
}

func (s *Server) deleteGlossaryEntry(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	gid, err := paramID(c, "gid")
	if err != nil {
		return err
	}
	if err := s.store.DeleteGlossaryEntry(c.Request().Context(), p.ID, gid); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/projects/"+c.Param("pid")+"/settings#glossary")
}

func (s *Server) renameProject(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	name := c.FormValue("name")
	if err := s.store.RenameProject(c.Request().Context(), p.ID, name); err != nil {
		if errors.Is(err, studio.ErrInvalid) {
			vm, verr := s.settingsVM(c, p)
			if verr != nil {
				return verr
			}
			vm.Form = views.ProjectForm{Name: name, NameErr: s.messageOf(c, 422, err)}
			return s.renderSettings(c, http.StatusUnprocessableEntity, vm)
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/projects/"+c.Param("pid"))
}

func (s *Server) archiveProject(c echo.Context) error   { return s.setArchived(c, true) }
func (s *Server) unarchiveProject(c echo.Context) error { return s.setArchived(c, false) }

func (s *Server) setArchived(c echo.Context, archived bool) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	if err := s.store.SetProjectArchived(c.Request().Context(), p.ID, archived); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/projects/"+c.Param("pid"))
}

func (s *Server) deleteProject(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	if c.FormValue("confirm") != p.Name {
		// Back to the settings page (not left on /projects/N/delete), saying why.
		return c.Redirect(http.StatusSeeOther, "/projects/"+strconv.FormatInt(p.ID, 10)+"/settings?delete=wrong")
	}
	if err := s.store.DeleteProject(c.Request().Context(), p.ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/projects")
}
