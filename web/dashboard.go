package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

// Managers' dashboards: every active project at a glance, and one project in detail.
// An htmx request (their periodic reload) gets only the numbers.

// dashboardFailures is how many failures a project's dashboard lists.
const dashboardFailures = 50

func (s *Server) showDashboard(c echo.Context) error {
	ctx := c.Request().Context()
	ps, err := s.store.Projects(ctx, studio.ProjectsOpts{})
	if err != nil {
		return err
	}
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	stats, err := s.store.ProjectStats(ctx, ids, studio.DashboardParams{})
	if err != nil {
		return err
	}
	rows := make([]views.DashboardRow, len(ps))
	for i, p := range ps {
		rows[i] = views.DashboardRow{Project: p, Stats: *stats[p.ID]}
	}
	page := s.page(c, s.t(c, "dash.title"), "dashboard")
	if isHTMX(c) {
		return s.render(c, http.StatusOK, views.DashboardTable(page, rows))
	}
	return s.render(c, http.StatusOK, views.Dashboard(page, rows))
}

func (s *Server) showProjectDashboard(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	vm := views.ProjectDashboardVM{Project: *p}
	stats, err := s.store.ProjectStats(ctx, []int64{p.ID}, studio.DashboardParams{})
	if err != nil {
		return err
	}
	vm.Stats = *stats[p.ID]
	if vm.Characters, err = s.store.CharacterStats(ctx, p.ID); err != nil {
		return err
	}
	if vm.Failed, err = s.store.FailedLines(ctx, p.ID, dashboardFailures); err != nil {
		return err
	}
	page := s.page(c, p.Name+" · "+s.t(c, "dash.title"), "dashboard")
	if isHTMX(c) {
		return s.render(c, http.StatusOK, views.ProjectDashboardRefresh(page, vm))
	}
	return s.render(c, http.StatusOK, views.ProjectDashboard(page, vm))
}

// throughputSeries is the chart data of a project's dashboard, in uPlot's column
// layout: minute starts (Unix seconds) and the audio seconds and lines rendered in
// each of the last 60 minutes.
type throughputSeries struct {
	T      []int64   `json:"t"`
	AudioS []float64 `json:"audio_s"`
	Lines  []int     `json:"lines"`
}

func (s *Server) showProjectThroughput(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	pts, err := s.store.ThroughputByMinute(c.Request().Context(), p.ID, studio.DashboardParams{Window: time.Hour})
	if err != nil {
		return err
	}
	out := throughputSeries{T: make([]int64, len(pts)), AudioS: make([]float64, len(pts)), Lines: make([]int, len(pts))}
	for i, pt := range pts {
		out.T[i], out.AudioS[i], out.Lines[i] = pt.Minute.Unix(), float64(pt.AudioMs)/1000, pt.Takes
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}
