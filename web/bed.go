package web

import (
	"errors"
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

// bedRoutes are the M&E bed's card, its upload (the source's limits) and removal,
// for editors of the project.
func (s *Server) bedRoutes(editor *echo.Group) {
	editor.GET("/projects/:pid/bed", s.showBed)
	editor.POST("/projects/:pid/bed", s.uploadBed)
	editor.POST("/projects/:pid/bed/delete", s.deleteBed)
}

// bedVM is the bed card of project p.
func (s *Server) bedVM(c echo.Context, p *studio.Project) (views.BedVM, error) {
	vm := views.BedVM{Project: *p, LimitMB: s.cfg.SourceMaxUploadBytes >> 20, Kind: studio.BedME}
	b, err := s.store.ProjectBed(c.Request().Context(), p.ID)
	switch {
	case err == nil:
		vm.Bed, vm.Kind = b, b.Kind
	case !errors.Is(err, studio.ErrNotFound):
		return vm, err
	}
	return vm, nil
}

func (s *Server) showBed(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.bedVM(c, p)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.BedCard(s.page(c, "", ""), vm))
}

// uploadBed takes a project's bed: an audio or video file (SOURCE_MAX_UPLOAD_MB,
// spooled as a source is) whose sound track media keeps, and its kind (an M&E track
// or a full mix to be ducked), sent before the file. A refused file is shown in the
// card and changes nothing.
func (s *Server) uploadBed(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.bedVM(c, p)
	if err != nil {
		return err
	}
	up, fields, err := s.spoolLargeUploadFields(c, "file", s.cfg.SourceMaxUploadBytes)
	var bed *studio.ProjectBed
	if err == nil {
		defer os.Remove(up.Path)
		var kind studio.BedKind
		if kind, err = studio.ParseBedKind(fields.Get("kind")); err == nil {
			bed, err = s.media.SetProjectBed(c.Request().Context(), p.ID, currentUser(c).ID, kind, up)
		}
	}
	if err != nil {
		status, msg, ok := s.refusal(c, err)
		if !ok {
			return err
		}
		vm.Error = msg
		return s.render(c, status, views.BedCard(s.page(c, "", ""), vm))
	}
	vm.Bed, vm.Kind, vm.Notice = bed, bed.Kind, s.t(c, "bed.saved")
	c.Response().Header().Set(hxTrigger, "picture-refresh")
	return s.render(c, http.StatusOK, views.BedCard(s.page(c, "", ""), vm))
}

// deleteBed forgets a project's bed.
func (s *Server) deleteBed(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	if err := s.media.DeleteProjectBed(c.Request().Context(), p.ID); err != nil {
		return err
	}
	vm, err := s.bedVM(c, p)
	if err != nil {
		return err
	}
	vm.Notice = s.t(c, "bed.removed")
	c.Response().Header().Set(hxTrigger, "picture-refresh")
	return s.render(c, http.StatusOK, views.BedCard(s.page(c, "", ""), vm))
}
