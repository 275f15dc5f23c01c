package web

import (
	"errors"
	"net/http"
	"strconv"

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

// project loads the :pid project.
func (s *Server) project(c echo.Context) (*studio.Project, error) {
	id, err := paramID(c, "pid")
	if err != nil {
		return nil, err
	}
	return s.store.Project(c.Request().Context(), id)
}

func (s *Server) listProjects(c echo.Context) error {
	ctx := c.Request().Context()
	archived := c.QueryParam("archived") == "1"
	ps, err := s.store.Projects(ctx, studio.ProjectsOpts{Archived: archived})
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
	vm := views.ProjectVM{Project: *p, Filter: lineFilter(c)}
	var err error
	if vm.Characters, err = s.store.Characters(ctx, p.ID); err != nil {
		return vm, err
	}
	if vm.Lines, err = s.store.Lines(ctx, p.ID, vm.Filter); err != nil {
		return vm, err
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

func (s *Server) showProjectSettings(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.ProjectSettings(s.page(c, p.Name, "projects"), *p, views.ProjectForm{Name: p.Name}))
}

func (s *Server) renameProject(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	name := c.FormValue("name")
	if err := s.store.RenameProject(c.Request().Context(), p.ID, name); err != nil {
		if errors.Is(err, studio.ErrInvalid) {
			return s.render(c, http.StatusUnprocessableEntity, views.ProjectSettings(s.page(c, p.Name, "projects"), *p,
				views.ProjectForm{Name: name, NameErr: s.messageOf(c, 422, err)}))
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
		return s.render(c, http.StatusUnprocessableEntity, views.ProjectSettings(s.page(c, p.Name, "projects"), *p,
			views.ProjectForm{Name: p.Name, DeleteErr: s.t(c, "project.delete_confirm_wrong")}))
	}
	if err := s.store.DeleteProject(c.Request().Context(), p.ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/projects")
}
