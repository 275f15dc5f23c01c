package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/views"
)

// The admin GPU page: every GPU of every live worker (from the registry and the
// state each worker publishes every two seconds), live charts, budget and seats, the
// concurrency profiles, their assignment to GPUs and the calibrations. Package fleet
// reads and checks all of it; the handlers parse, call it and render.

func (s *Server) gpuRoutes(admin *echo.Group) {
	admin.GET("/admin/gpus", s.showGPUs)
	admin.GET("/admin/gpus/live", s.showGPULive)
	admin.GET("/admin/gpus/samples.json", s.gpuSamples)
	admin.POST("/admin/gpus/profiles", s.saveGPUProfile)
	admin.POST("/admin/gpus/profiles/:id", s.saveGPUProfile)
	admin.POST("/admin/gpus/profiles/:id/delete", s.deleteGPUProfile)
	admin.POST("/admin/gpus/assign", s.assignGPUProfile)
	admin.POST("/admin/gpus/calibrations", s.startCalibration)
	admin.GET("/admin/gpus/calibrations/:id", s.showCalibration)
	admin.POST("/admin/gpus/calibrations/:id/apply", s.applyCalibration)
	admin.POST("/admin/gpus/calibrations/:id/cancel", s.cancelCalibration)
}

// liveGPUs reads the GPUs of the workers that are alive, and the live workers that
// have none, for the page.
func (s *Server) liveGPUs(ctx context.Context) ([]views.GPUCard, []views.CPUWorker, error) {
	board, err := fleet.ReadBoard(ctx, s.store)
	if err != nil {
		return nil, nil, err
	}
	for _, err := range board.Unreadable {
		s.logger.WarnContext(ctx, "unreadable GPU state", "err", err)
	}
	cards := make([]views.GPUCard, len(board.Cards))
	for i, c := range board.Cards {
		cards[i] = views.GPUCard(c)
	}
	cpu := make([]views.CPUWorker, len(board.CPUWorkers))
	for i, w := range board.CPUWorkers {
		cpu[i] = views.CPUWorker(w)
	}
	return cards, cpu, nil
}

// gpuPage builds the page's view model; form is the new-profile form, edited the
// form of a profile being edited (nil: as stored).
func (s *Server) gpuPage(c echo.Context, form views.GPUProfileForm, edited *views.GPUProfileForm) (views.GPUsVM, error) {
	ctx := c.Request().Context()
	cards, cpu, err := s.liveGPUs(ctx)
	if err != nil {
		return views.GPUsVM{}, err
	}
	profiles, err := s.store.GPUProfiles(ctx)
	if err != nil {
		return views.GPUsVM{}, err
	}
	uses := map[int64]int{}
	as, err := s.store.GPUAssignments(ctx)
	if err != nil {
		return views.GPUsVM{}, err
	}
	for _, a := range as {
		uses[a.ProfileID]++
	}
	vm := views.GPUsVM{Cards: cards, CPUWorkers: cpu, Form: form}
	for _, p := range profiles {
		f := views.GPUProfileForm{ID: p.ID, Values: fleet.ProfileValues(fleet.ProfileOf(p))}
		if edited != nil && edited.ID == p.ID {
			f = *edited
		}
		vm.Profiles = append(vm.Profiles, views.GPUProfileRow{Profile: p, Form: f, GPUs: uses[p.ID]})
	}
	if vm.Calibrations, err = s.calibrationRows(c, 20); err != nil {
		return views.GPUsVM{}, err
	}
	return vm, nil
}

func (s *Server) calibrationRows(c echo.Context, limit int) ([]views.CalibrationRow, error) {
	recs, err := fleet.Calibrations(c.Request().Context(), s.store, limit)
	if err != nil {
		return nil, err
	}
	rows := make([]views.CalibrationRow, len(recs))
	for i, r := range recs {
		rows[i] = s.calibrationRow(c, r)
	}
	return rows, nil
}

// calibrationRow is a calibration in the user's language.
func (s *Server) calibrationRow(c echo.Context, r fleet.CalibrationRecord) views.CalibrationRow {
	row := views.CalibrationRow{C: r.GPUCalibration, ProfileName: r.ProfileName, Result: r.Result}
	if row.ProfileName == "" {
		row.ProfileName = s.t(c, "gpus.profile_default")
	}
	if r.Progress != nil {
		row.Progress = r.Progress.In(langOf(c))
	}
	return row
}

func (s *Server) renderGPUs(c echo.Context, status int, vm views.GPUsVM) error {
	return s.render(c, status, views.GPUsPage(s.page(c, s.t(c, "gpus.title"), "gpus"), vm))
}

func (s *Server) showGPUs(c echo.Context) error {
	vm, err := s.gpuPage(c, views.GPUProfileForm{Values: newProfileValues()}, nil)
	if err != nil {
		return err
	}
	vm.Notice = c.QueryParam("notice")
	if vm.Notice != "" && !i18n.Has(vm.Notice) {
		vm.Notice = ""
	}
	if vm.Notice != "" {
		vm.Notice = s.t(c, vm.Notice, noticeArgs(c, vm.Notice)...)
	}
	return s.renderGPUs(c, http.StatusOK, vm)
}

// noticeArgs are the arguments of a notice passed in the redirect, as the
// message's verbs want them (%d an integer, anything else the text).
func noticeArgs(c echo.Context, key string) []any {
	m, _ := i18n.Lookup(key)
	var verbs []byte
	for i := 0; i < len(m.EN); i++ {
		if m.EN[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(m.EN) && strings.IndexByte("+-# 0123456789.", m.EN[j]) >= 0 {
			j++
		}
		if j < len(m.EN) && m.EN[j] != '%' {
			verbs = append(verbs, m.EN[j])
		}
		i = j
	}
	var out []any
	for i, a := range c.QueryParams()["arg"] {
		if i < len(verbs) && verbs[i] == 'd' {
			n, _ := strconv.Atoi(a)
			out = append(out, n)
			continue
		}
		out = append(out, a)
	}
	return out
}

// redirectNotice sends the browser back to the page with a notice.
func redirectNotice(c echo.Context, path, key string, args ...any) error {
	q := "?notice=" + key
	for _, a := range args {
		q += "&arg=" + url.QueryEscape(fmt.Sprint(a))
	}
	return c.Redirect(http.StatusSeeOther, path+q)
}

// showGPULive answers the page's poll with every card's live part.
func (s *Server) showGPULive(c echo.Context) error {
	cards, _, err := s.liveGPUs(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.GPULiveUpdate(s.page(c, "", "gpus"), cards))
}

// gpuSeries is one GPU's samples for the charts: [t ms, used bytes, total bytes,
// util %, temperature °C, power W] (null where the card gave no reading).
type gpuSeries struct {
	Key    string  `json:"key"`
	Points [][]any `json:"points"`
	// Batch is a batching host's batch readings: [t ms, decoding, in s2mel, waiting,
	// decode tokens/s, KV in use bytes] (absent without a batching host).
	Batch [][]any `json:"batch,omitempty"`
}

// gpuSamples serves the samples newer than ?since (Unix ms) of every live GPU, and
// the batch readings newer than ?batch_since (they are taken at other times).
func (s *Server) gpuSamples(c echo.Context) error {
	since, _ := strconv.ParseInt(c.QueryParam("since"), 10, 64)
	batchSince, _ := strconv.ParseInt(c.QueryParam("batch_since"), 10, 64)
	cards, _, err := s.liveGPUs(c.Request().Context())
	if err != nil {
		return err
	}
	out := struct {
		GPUs []gpuSeries `json:"gpus"`
	}{GPUs: []gpuSeries{}}
	for _, cd := range cards {
		sr := gpuSeries{Key: cd.Worker + "|" + cd.GPU.UUID, Points: [][]any{}}
		for _, p := range cd.GPU.Recent {
			if p.T <= since {
				continue
			}
			opt := func(m gpu.Metric, v any) any {
				if !p.Has(m) {
					return nil
				}
				return v
			}
			sr.Points = append(sr.Points, []any{p.T, opt(gpu.MetricMemory, p.UsedBytes), opt(gpu.MetricMemory, p.TotalBytes),
				opt(gpu.MetricUtilization, p.GPUPercent), opt(gpu.MetricTemperature, p.TempC), opt(gpu.MetricPower, p.PowerWatts)})
		}
		for _, b := range cd.GPU.BatchRecent {
			if b.T > batchSince {
				sr.Batch = append(sr.Batch, []any{b.T, b.Decoding, b.InS2Mel, b.Waiting, b.DecodeTokensPerSecond, b.KVUsedBytes})
			}
		}
		out.GPUs = append(out.GPUs, sr)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}

func newProfileValues() map[string]string {
	v := fleet.ProfileValues(gpu.DefaultProfile())
	v["Name"] = ""
	return v
}

// parseProfileForm reads a profile form; the form keeps what was typed and an
// inline message for every invalid field.
func (s *Server) parseProfileForm(c echo.Context, id int64) (gpu.Profile, views.GPUProfileForm, bool) {
	f := views.GPUProfileForm{ID: id, Values: map[string]string{}, Errors: map[string]string{}}
	for _, k := range views.ProfileFields {
		f.Values[k] = strings.TrimSpace(c.FormValue(k))
	}
	for _, k := range fleet.ProfileFlags {
		if c.FormValue(k) != "" {
			f.Values[k] = "on"
		}
	}
	for _, k := range fleet.ProfileChoices {
		f.Values[k] = strings.TrimSpace(c.FormValue(k))
	}
	p, probs := fleet.ParseProfile(f.Values)
	for _, pr := range probs {
		if _, seen := f.Errors[pr.Field]; !seen {
			f.Errors[pr.Field] = pr.In(langOf(c))
		}
	}
	return p, f, len(f.Errors) == 0
}

// saveGPUProfile creates or updates a profile; invalid fields come back inline.
func (s *Server) saveGPUProfile(c echo.Context) error {
	ctx := c.Request().Context()
	var id int64
	if c.Param("id") != "" {
		var err error
		if id, err = paramID(c, "id"); err != nil {
			return err
		}
		if _, err := s.store.GPUProfileByID(ctx, id); err != nil {
			return err
		}
	}
	p, form, ok := s.parseProfileForm(c, id)
	if ok {
		sp, misfit, err := fleet.SaveProfile(ctx, s.store, currentUser(c).ID, id, p)
		switch {
		case misfit != nil:
			form.Problem = misfit.In(langOf(c))
		case err == nil:
			return redirectNotice(c, "/admin/gpus", "gpus.profile.saved", sp.Name)
		case errors.Is(err, studio.ErrConflict):
			form.Errors["Name"] = s.t(c, "gpus.profile.name_taken")
		default:
			return err
		}
	}
	newForm := views.GPUProfileForm{Values: newProfileValues()}
	var edited *views.GPUProfileForm
	if id == 0 {
		newForm = form
	} else {
		edited = &form
	}
	vm, err := s.gpuPage(c, newForm, edited)
	if err != nil {
		return err
	}
	return s.renderGPUs(c, http.StatusUnprocessableEntity, vm)
}

func (s *Server) deleteGPUProfile(c echo.Context) error {
	id, err := paramID(c, "id")
	if err != nil {
		return err
	}
	if err := s.store.DeleteGPUProfile(c.Request().Context(), id); err != nil {
		return err
	}
	return redirectNotice(c, "/admin/gpus", "gpus.profile.deleted")
}

// assignGPUProfile makes a GPU run a profile (0: the default), refusing one that
// cannot fit it with the measured numbers.
func (s *Server) assignGPUProfile(c echo.Context) error {
	ctx := c.Request().Context()
	uuid := strings.TrimSpace(c.FormValue("gpu_uuid"))
	id, err := strconv.ParseInt(c.FormValue("profile_id"), 10, 64)
	if err != nil || id < 0 || uuid == "" {
		return echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_request"))
	}
	name, misfit, err := fleet.AssignProfile(ctx, s.store, currentUser(c).ID, uuid, id)
	if err != nil {
		return err
	}
	if misfit != nil {
		vm, err := s.gpuPage(c, views.GPUProfileForm{Values: newProfileValues()}, nil)
		if err != nil {
			return err
		}
		vm.Error = misfit.In(langOf(c))
		return s.renderGPUs(c, http.StatusUnprocessableEntity, vm)
	}
	if name == "" {
		name = s.t(c, "gpus.profile_default")
	}
	return redirectNotice(c, "/admin/gpus", "gpus.assigned", uuid, name)
}

// startCalibration asks the worker that owns a GPU to calibrate it.
func (s *Server) startCalibration(c echo.Context) error {
	ctx := c.Request().Context()
	uuid := strings.TrimSpace(c.FormValue("gpu_uuid"))
	id, err := strconv.ParseInt(c.FormValue("profile_id"), 10, 64)
	if err != nil || id < 0 || uuid == "" {
		return echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_request"))
	}
	cal, err := fleet.RequestCalibration(ctx, s.store, currentUser(c).ID, uuid, id)
	switch {
	case errors.Is(err, fleet.ErrUnknownGPU):
		return echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "gpus.unknown_gpu"))
	case errors.Is(err, studio.ErrConflict):
		return echo.NewHTTPError(http.StatusConflict, s.t(c, "gpus.calibration.busy"))
	case err != nil:
		return err
	}
	return redirectNotice(c, "/admin/gpus", "gpus.calibration.requested", cal.ID)
}

func (s *Server) calibration(c echo.Context) (fleet.CalibrationRecord, error) {
	id, err := paramID(c, "id")
	if err != nil {
		return fleet.CalibrationRecord{}, err
	}
	cal, err := s.store.GPUCalibrationByID(c.Request().Context(), id)
	if err != nil {
		return fleet.CalibrationRecord{}, err
	}
	return fleet.RecordOf(*cal), nil
}

func (s *Server) showCalibration(c echo.Context) error {
	cal, err := s.calibration(c)
	if err != nil {
		return err
	}
	vm := views.CalibrationVM{Row: s.calibrationRow(c, cal)}
	return s.render(c, http.StatusOK, views.CalibrationPage(s.page(c, s.t(c, "gpus.calibration.title", cal.ID), "gpus"), vm))
}

// applyCalibration puts a calibration's recommendation and curve in force.
func (s *Server) applyCalibration(c echo.Context) error {
	cal, err := s.calibration(c)
	if err != nil {
		return err
	}
	row := s.calibrationRow(c, cal)
	if cal.Status != studio.CalibrationDone || cal.Result == nil || cal.Result.Recommended < 1 {
		return echo.NewHTTPError(http.StatusConflict, s.t(c, "error.conflict"))
	}
	r := cal.Result
	if err := s.store.ApplyGPUCalibration(c.Request().Context(), currentUser(c).ID, cal.ID, r.Recommended,
		r.RecommendedProfile.LongLaneLimit); err != nil {
		return err
	}
	return redirectNotice(c, "/admin/gpus", "gpus.calibration.applied", cal.GPUUUID, row.ProfileName, r.Recommended)
}

func (s *Server) cancelCalibration(c echo.Context) error {
	cal, err := s.calibration(c)
	if err != nil {
		return err
	}
	if err := s.store.CancelGPUCalibration(c.Request().Context(), cal.ID); err != nil {
		return err
	}
	return redirectNotice(c, "/admin/gpus", "gpus.calibration.cancelled")
}
