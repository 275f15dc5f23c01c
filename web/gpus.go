package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/views"
	"dubstudio/workflow"
)

// The admin GPU page: every GPU of every live worker (from the registry and the
// state each worker publishes every two seconds), live charts, budget and slots, the
// concurrency profiles, their assignment to GPUs and the calibrations.

// staleAfter is how old a worker's published state may be before the page says so.
const staleAfter = 10 * time.Second

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
// have none.
func (s *Server) liveGPUs(ctx context.Context) ([]views.GPUCard, []views.CPUWorker, error) {
	now := time.Now()
	states, err := s.store.GPULiveStates(ctx)
	if err != nil {
		return nil, nil, err
	}
	workers, err := s.store.Workers(ctx)
	if err != nil {
		return nil, nil, err
	}
	assigned := map[string]int64{}
	as, err := s.store.GPUAssignments(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range as {
		assigned[a.GPUUUID] = a.ProfileID
	}
	published := map[string]bool{}
	var cards []views.GPUCard
	for _, l := range states {
		if !l.Alive(now) {
			continue
		}
		var st gpu.LiveState
		if err := json.Unmarshal(l.State, &st); err != nil {
			s.logger.WarnContext(ctx, "unreadable GPU state", "worker", l.Worker, "err", err)
			continue
		}
		published[l.Worker] = len(st.GPUs) > 0
		stale := 0
		if age := now.Sub(l.UpdatedAt); age > staleAfter {
			stale = int(age.Seconds())
		}
		for _, g := range st.GPUs {
			cards = append(cards, views.GPUCard{Worker: l.Worker, Host: l.Host, Engine: st.Engine, Simulated: st.Simulated,
				StaleSeconds: stale, GPU: g, AssignedID: assigned[g.UUID]})
		}
	}
	var cpu []views.CPUWorker
	for _, w := range workers {
		if w.Alive(now) && !published[w.Name] {
			cpu = append(cpu, views.CPUWorker{Name: w.Name, Host: w.Host, Engines: w.Engines})
		}
	}
	sortCards(cards)
	if err := s.describeRunning(ctx, cards); err != nil {
		return nil, nil, err
	}
	return cards, cpu, nil
}

var lineRequest = regexp.MustCompile(`^line (\d+)$`)

// describeRunning names the lines the slots are rendering.
func (s *Server) describeRunning(ctx context.Context, cards []views.GPUCard) error {
	var ids []int64
	for _, cd := range cards {
		for _, h := range cd.GPU.Snapshot.Hosts {
			for _, sl := range h.Slots {
				if m := lineRequest.FindStringSubmatch(sl.Request); m != nil {
					id, _ := strconv.ParseInt(m[1], 10, 64)
					ids = append(ids, id)
				}
			}
		}
	}
	lines, err := s.store.LineSummaries(ctx, ids)
	if err != nil || len(lines) == 0 {
		return err
	}
	for i := range cards {
		cards[i].Running = map[string]views.RunningLine{}
		for _, h := range cards[i].GPU.Snapshot.Hosts {
			for _, sl := range h.Slots {
				m := lineRequest.FindStringSubmatch(sl.Request)
				if m == nil {
					continue
				}
				id, _ := strconv.ParseInt(m[1], 10, 64)
				if l, ok := lines[id]; ok {
					cards[i].Running[sl.Request] = views.RunningLine{ProjectID: l.ProjectID, LineID: l.ID, Text: l.Text}
				}
			}
		}
	}
	return nil
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
		f := views.ProfileFormOf(p)
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
	cs, err := s.store.GPUCalibrations(c.Request().Context(), limit)
	if err != nil {
		return nil, err
	}
	rows := make([]views.CalibrationRow, len(cs))
	for i, cal := range cs {
		rows[i] = s.calibrationRow(c, cal)
	}
	return rows, nil
}

func (s *Server) calibrationRow(c echo.Context, cal studio.GPUCalibration) views.CalibrationRow {
	row := views.CalibrationRow{C: cal}
	if p, err := cal.ProfileValue(); err == nil {
		row.ProfileName = p.Name
	}
	if row.ProfileName == "" {
		row.ProfileName = s.t(c, "gpus.profile_default")
	}
	if cal.Progress != "" && cal.Active() {
		var pr workflow.Progress
		if json.Unmarshal([]byte(cal.Progress), &pr) == nil && i18n.Has(pr.Key) {
			row.Progress = gpu.Warning{Key: pr.Key, Args: pr.Args}.In(langOf(c))
		}
	}
	if len(cal.Result) > 0 && string(cal.Result) != "null" {
		var r calibrate.Result
		if err := json.Unmarshal(cal.Result, &r); err == nil {
			row.Result = &r
		}
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
}

// gpuSamples serves the samples newer than ?since (Unix ms) of every live GPU.
func (s *Server) gpuSamples(c echo.Context) error {
	since, _ := strconv.ParseInt(c.QueryParam("since"), 10, 64)
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
		out.GPUs = append(out.GPUs, sr)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}

func newProfileValues() map[string]string {
	f := views.ProfileFormOf(studio.GPUProfile{})
	d := gpu.DefaultProfile()
	f.Values["Name"] = ""
	f.Values["MaxSlots"] = strconv.Itoa(d.MaxSlots)
	f.Values["ReservePct"] = strconv.FormatFloat(d.ReservePct, 'f', -1, 64)
	f.Values["LongTextThresholdSec"] = strconv.FormatFloat(d.LongTextThresholdSec, 'f', -1, 64)
	f.Values["LongLaneLimit"] = strconv.Itoa(d.LongLaneLimit)
	f.Values["MaxGenSeconds"] = strconv.FormatFloat(d.MaxGenSeconds, 'f', -1, 64)
	f.Values["SegmentTokens"] = strconv.Itoa(d.SegmentTokens)
	f.Values["FP16"] = "on"
	return f.Values
}

// parseProfileForm reads a profile form; the form keeps what was typed and an
// inline message for every invalid field.
func (s *Server) parseProfileForm(c echo.Context, id int64) (gpu.Profile, views.GPUProfileForm, bool) {
	f := views.GPUProfileForm{ID: id, Values: map[string]string{}, Errors: map[string]string{}}
	for _, k := range views.ProfileFields {
		f.Values[k] = strings.TrimSpace(c.FormValue(k))
	}
	for _, k := range []string{"FP16", "EmotionTextModel", "ShareWeights"} {
		if c.FormValue(k) != "" {
			f.Values[k] = "on"
		}
	}
	p := gpu.Profile{Name: f.Values["Name"], FP16: f.Values["FP16"] != "", EmotionTextModel: f.Values["EmotionTextModel"] != "",
		ShareWeights: f.Values["ShareWeights"] != ""}
	num := func(k string, dst *float64) {
		v, err := strconv.ParseFloat(f.Values[k], 64)
		if err != nil {
			f.Errors[k] = s.t(c, "gpus.profile.not_number")
			return
		}
		*dst = v
	}
	whole := func(k string, dst *int) {
		v, err := strconv.Atoi(f.Values[k])
		if err != nil {
			f.Errors[k] = s.t(c, "gpus.profile.not_number")
			return
		}
		*dst = v
	}
	whole("MaxSlots", &p.MaxSlots)
	num("ReservePct", &p.ReservePct)
	num("LongTextThresholdSec", &p.LongTextThresholdSec)
	whole("LongLaneLimit", &p.LongLaneLimit)
	num("MaxGenSeconds", &p.MaxGenSeconds)
	whole("SegmentTokens", &p.SegmentTokens)
	var ve *gpu.ValidationError
	if err := p.Validate(); errors.As(err, &ve) {
		for _, pr := range ve.Problems {
			if _, typed := f.Errors[pr.Field]; !typed {
				f.Errors[pr.Field] = pr.In(langOf(c))
			}
		}
	}
	return p, f, len(f.Errors) == 0
}

// calibrationOf returns the prediction curve a GPU runs with: its applied
// calibration, or the defaults for p.
func (s *Server) calibrationOf(ctx context.Context, uuid string, p gpu.Profile) (gpu.Calibration, error) {
	settings, err := s.store.GPUSettings(ctx, []string{uuid})
	if err != nil {
		return gpu.Calibration{}, err
	}
	if st, ok := settings[uuid]; ok && len(st.Calibration) > 0 {
		var r calibrate.Result
		if json.Unmarshal(st.Calibration, &r) == nil && r.Calibration.Calibrated() {
			return r.Calibration, nil
		}
	}
	return gpu.DefaultCalibration(p), nil
}

// checkFits refuses p on the live GPUs with the given UUIDs when it cannot run one
// slot there, with the measured numbers; GPUs no live worker has are not checked.
func (s *Server) checkFits(c echo.Context, p gpu.Profile, uuids []string) (string, error) {
	ctx := c.Request().Context()
	cards, _, err := s.liveGPUs(ctx)
	if err != nil {
		return "", err
	}
	for _, cd := range cards {
		found := false
		for _, u := range uuids {
			found = found || u == cd.GPU.UUID
		}
		if !found {
			continue
		}
		cal, err := s.calibrationOf(ctx, cd.GPU.UUID, p)
		if err != nil {
			return "", err
		}
		total := cd.GPU.Snapshot.TotalBytes
		if total == 0 {
			total = cd.GPU.TotalBytes
		}
		if err := gpu.CheckFits(p, cal, total, cd.GPU.Snapshot.ForeignBytes); err != nil {
			var ie *i18n.Error
			if errors.As(err, &ie) {
				return s.t(c, "gpus.profile.on_gpu", gpuLabel(cd), ie.In(langOf(c))), nil
			}
			return err.Error(), nil
		}
	}
	return "", nil
}

func gpuLabel(cd views.GPUCard) string {
	return fmt.Sprintf("%d %s (%s)", cd.GPU.Index, cd.GPU.Name, cd.Host)
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
	if ok && id != 0 {
		// A profile in use must still fit the GPUs it runs on.
		as, err := s.store.GPUAssignments(ctx)
		if err != nil {
			return err
		}
		var uuids []string
		for _, a := range as {
			if a.ProfileID == id {
				uuids = append(uuids, a.GPUUUID)
			}
		}
		if form.Problem, err = s.checkFits(c, p, uuids); err != nil {
			return err
		}
		ok = form.Problem == ""
	}
	var err error
	if ok {
		sp := workflow.StoredProfile(id, p)
		err = s.store.SaveGPUProfile(ctx, currentUser(c).ID, &sp)
		if err == nil {
			return redirectNotice(c, "/admin/gpus", "gpus.profile.saved", sp.Name)
		}
		if !errors.Is(err, studio.ErrConflict) {
			return err
		}
		form.Errors["Name"] = s.t(c, "gpus.profile.name_taken")
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
	p, name := gpu.DefaultProfile(), s.t(c, "gpus.profile_default")
	if id != 0 {
		sp, err := s.store.GPUProfileByID(ctx, id)
		if err != nil {
			return err
		}
		p, name = workflow.ProfileOf(*sp), sp.Name
	}
	problem, err := s.checkFits(c, p, []string{uuid})
	if err != nil {
		return err
	}
	if problem != "" {
		vm, err := s.gpuPage(c, views.GPUProfileForm{Values: newProfileValues()}, nil)
		if err != nil {
			return err
		}
		vm.Error = problem
		return s.renderGPUs(c, http.StatusUnprocessableEntity, vm)
	}
	if err := s.store.AssignGPUProfile(ctx, currentUser(c).ID, uuid, id); err != nil {
		return err
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
	cards, _, err := s.liveGPUs(ctx)
	if err != nil {
		return err
	}
	name := ""
	for _, cd := range cards {
		if cd.GPU.UUID == uuid {
			name = cd.GPU.Name
		}
	}
	if name == "" {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "gpus.unknown_gpu"))
	}
	sp := workflow.StoredProfile(0, gpu.DefaultProfile())
	if id != 0 {
		p, err := s.store.GPUProfileByID(ctx, id)
		if err != nil {
			return err
		}
		sp = *p
	}
	cal, err := s.store.RequestGPUCalibration(ctx, currentUser(c).ID, uuid, name, sp)
	if errors.Is(err, studio.ErrConflict) {
		return echo.NewHTTPError(http.StatusConflict, s.t(c, "gpus.calibration.busy"))
	}
	if err != nil {
		return err
	}
	return redirectNotice(c, "/admin/gpus", "gpus.calibration.requested", cal.ID)
}

func (s *Server) calibration(c echo.Context) (*studio.GPUCalibration, error) {
	id, err := paramID(c, "id")
	if err != nil {
		return nil, err
	}
	return s.store.GPUCalibrationByID(c.Request().Context(), id)
}

func (s *Server) showCalibration(c echo.Context) error {
	cal, err := s.calibration(c)
	if err != nil {
		return err
	}
	vm := views.CalibrationVM{Row: s.calibrationRow(c, *cal)}
	return s.render(c, http.StatusOK, views.CalibrationPage(s.page(c, s.t(c, "gpus.calibration.title", cal.ID), "gpus"), vm))
}

// applyCalibration puts a calibration's recommendation and curve in force.
func (s *Server) applyCalibration(c echo.Context) error {
	cal, err := s.calibration(c)
	if err != nil {
		return err
	}
	row := s.calibrationRow(c, *cal)
	if cal.Status != studio.CalibrationDone || row.Result == nil || row.Result.Recommended < 1 {
		return echo.NewHTTPError(http.StatusConflict, s.t(c, "error.conflict"))
	}
	r := row.Result
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

// sortCards orders cards by host, then GPU index.
func sortCards(cards []views.GPUCard) {
	sort.SliceStable(cards, func(i, j int) bool {
		if cards[i].Host != cards[j].Host {
			return cards[i].Host < cards[j].Host
		}
		return cards[i].GPU.Index < cards[j].GPU.Index
	})
}
