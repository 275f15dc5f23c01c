package web

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

// Exporter queues export jobs (the workflow pipeline).
type Exporter interface {
	Export(ctx context.Context, projectID, userID int64, approvedOnly bool) (*studio.Export, error)
}

func (s *Server) showExports(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	exports, err := s.store.Exports(c.Request().Context(), p.ID)
	if err != nil {
		return err
	}
	if isHTMX(c) {
		return s.render(c, http.StatusOK, views.ExportList(s.page(c, p.Name, "projects"), *p, exports))
	}
	return s.render(c, http.StatusOK, views.ExportsPage(s.page(c, p.Name, "projects"), *p, exports))
}

func (s *Server) startExport(c echo.Context) error {
	if s.exporter == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable)
	}
	p, err := s.project(c)
	if err != nil {
		return err
	}
	approvedOnly := c.FormValue("takes") != "done"
	if _, err := s.exporter.Export(c.Request().Context(), p.ID, currentUser(c).ID, approvedOnly); err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/projects/"+strconv.FormatInt(p.ID, 10)+"/exports")
	}
	return s.showExports(c)
}

// downloadExport sends a finished archive. The file path comes from the export's ID,
// never from the request.
func (s *Server) downloadExport(c echo.Context) error {
	pid, err := paramID(c, "pid")
	if err != nil {
		return err
	}
	eid, err := paramID(c, "eid")
	if err != nil {
		return err
	}
	ex, err := s.store.Export(c.Request().Context(), pid, eid)
	if err != nil {
		return err
	}
	if ex.State != studio.ExportDone {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	path := filepath.Join(s.cfg.DataDir, "exports", "export-"+strconv.FormatInt(ex.ID, 10)+".zip")
	if _, err := os.Stat(path); err != nil {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	return c.Attachment(path, ex.FileName)
}
