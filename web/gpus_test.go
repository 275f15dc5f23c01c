package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
	"dubstudio/studio"
	"dubstudio/tts"
)

const testGPU = "GPU-0c4d1a2e-test"

// publishGPU registers worker w1 on host gpu-box and publishes one 24 GiB GPU with
// two hosts, one of them rendering the project's first line.
func publishGPU(t *testing.T, b *testBundle) studio.Line {
	t.Helper()
	ctx := context.Background()
	lines, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	line := lines[0]
	require.NoError(t, b.store.RegisterWorker(ctx, studio.WorkerInfo{Name: "w1", Host: "gpu-box", PID: 7, Engines: []string{"indextts"}, Concurrency: 2}))
	now := time.Now()
	var recent []gpu.Point
	for i := range 5 {
		recent = append(recent, gpu.Point{T: now.Add(time.Duration(i-5) * time.Second).UnixMilli(), UsedBytes: int64(10+i) << 30,
			TotalBytes: 24 << 30, GPUPercent: 40 + i, TempC: 50, PowerWatts: 210.5})
	}
	latest := recent[len(recent)-1]
	p := gpu.DefaultProfile()
	st := gpu.LiveState{Worker: "w1", Host: "gpu-box", At: now, Engine: "indextts", Waiting: 3, NeverFits: 1,
		GPUs: []gpu.LiveGPU{{
			Device: gpu.Device{Index: 0, UUID: testGPU, Name: "NVIDIA L40S", TotalBytes: 24 << 30},
			Latest: &latest, Recent: recent,
			Processes: []gpu.ProcessMemory{{PID: 4001, UsedBytes: 6 << 30}, {PID: 4002, UsedBytes: 5 << 30}},
			Snapshot: gpu.GPUSnapshot{UUID: testGPU, Name: "NVIDIA L40S", Profile: p, TotalBytes: 24 << 30,
				BudgetBytes: 20 << 30, CommittedBytes: 12 << 30, NVMLUsedBytes: 14 << 30, ForeignBytes: 1 << 30,
				SafetyFactor: 1.25, Running: 1,
				Hosts: []gpu.HostSnapshot{
					{ID: testGPU + "/0", PID: 4001, State: gpu.HostServing, ModelBytes: 5 << 30, CachedBytes: 1 << 30,
						NVMLBytes: 6 << 30, Seats: []gpu.SeatSnapshot{{Seat: 0, Request: fmt.Sprintf("line %d", line.ID), LineID: line.ID,
							AudioSeconds: 1.5, PredictedBytes: 200 << 20, Since: now.Add(-2 * time.Second)}}},
					{ID: testGPU + "/1", PID: 4002, State: gpu.HostServing, ModelBytes: 5 << 30, NVMLBytes: 5 << 30,
						Seats: []gpu.SeatSnapshot{{Seat: 1}}},
				}},
			Counters: gpu.GPUCounters{Admitted: 12, Completed: 11, OOMs: 1, HostDeaths: 2, LostLeases: 1, CacheReleases: 4},
			Pool: []gpu.HostStatus{{ID: testGPU + "/0", PID: 4001, State: gpu.HostServing, Restarts: 2, Weights: gpu.WeightsLend},
				{ID: testGPU + "/1", PID: 4002, State: gpu.HostServing, Weights: gpu.WeightsBorrow}},
		}}}
	data, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, b.store.PublishGPULive(ctx, "w1", "gpu-box", data))
	return line
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestGPUPagesAreForAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gets := []string{"/admin/gpus", "/admin/gpus/live", "/admin/gpus/samples.json", "/admin/gpus/calibrations/1"}
	posts := []string{"/admin/gpus/profiles", "/admin/gpus/profiles/1", "/admin/gpus/profiles/1/delete", "/admin/gpus/assign",
		"/admin/gpus/calibrations", "/admin/gpus/calibrations/1/apply", "/admin/gpus/calibrations/1/cancel"}
	for _, role := range []studio.Role{studio.RoleEditor, studio.RoleManager} {
		c := b.as(t, role)
		for _, p := range gets {
			require.Equal(t, http.StatusForbidden, c.get(p).StatusCode, "GET %s as %s", p, role)
		}
		for _, p := range posts {
			require.Equal(t, http.StatusForbidden, c.post(p, nil, true).StatusCode, "POST %s as %s", p, role)
		}
	}
	anon := b.anon(t)
	for _, p := range gets {
		resp := anon.get(p)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, p)
		require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login"), p)
	}
	admin := b.as(t, studio.RoleAdmin)
	for _, p := range gets[:3] {
		require.Equal(t, http.StatusOK, admin.get(p).StatusCode, p)
	}
	require.Equal(t, http.StatusNotFound, admin.get("/admin/gpus/calibrations/1").StatusCode)
	// The navigation leads admins, and only them, to the page.
	d := doc(t, admin.get("/projects"))
	require.Equal(t, 1, d.Find(`nav a[href="/admin/gpus"]`).Length())
	d = doc(t, b.as(t, studio.RoleEditor).get("/projects"))
	require.Zero(t, d.Find(`nav a[href="/admin/gpus"]`).Length())
}

// On a machine without GPUs (this one) the page renders and says so plainly.
func TestGPUPageWithoutGPU(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.store.RegisterWorker(context.Background(), studio.WorkerInfo{Name: "laptop", Host: "desk", PID: 1,
		Engines: []string{"espeak"}, Concurrency: 2}))
	c := b.as(t, studio.RoleAdmin)
	d := doc(t, c.get("/admin/gpus"))
	require.Equal(t, 1, d.Find(`[data-testid=no-gpu]`).Length())
	require.Contains(t, d.Find(`[data-testid=no-gpu]`).Text(), "No GPU")
	require.Zero(t, d.Find(`[data-testid=gpu-card]`).Length())
	require.Contains(t, d.Find(`[data-testid=cpu-worker]`).Text(), "laptop on desk renders with espeak")
	require.Equal(t, 1, d.Find(`[data-testid=new-profile]`).Length(), "profiles can be prepared before a GPU exists")
	require.Contains(t, d.Find(`[data-testid=calibrations]`).Text(), "No calibration yet")

	var samples struct {
		GPUs []json.RawMessage `json:"gpus"`
	}
	require.NoError(t, json.Unmarshal([]byte(body(t, c.get("/admin/gpus/samples.json"))), &samples))
	require.Empty(t, samples.GPUs)

	// In Chinese too.
	require.Equal(t, http.StatusSeeOther, c.post("/me/lang", url.Values{"lang": {"zh"}}, true).StatusCode)
	d = doc(t, c.get("/admin/gpus"))
	require.Contains(t, d.Find(`[data-testid=no-gpu]`).Text(), "没有 GPU")
}

func TestGPUPageShowsEveryPublishedGPU(t *testing.T) {
	t.Parallel()
	b := setup(t)
	line := publishGPU(t, b)
	c := b.as(t, studio.RoleAdmin)
	d := doc(t, c.get("/admin/gpus"))
	require.Zero(t, d.Find(`[data-testid=no-gpu]`).Length())
	card := d.Find(`[data-testid=gpu-card]`)
	require.Equal(t, 1, card.Length())
	uuid, _ := card.Attr("data-uuid")
	require.Equal(t, testGPU, uuid)
	require.Contains(t, card.Find("h2").Text(), "GPU 0 · NVIDIA L40S")
	require.Contains(t, card.Text(), "gpu-box")
	text := func(id string) string { return strings.TrimSpace(card.Find(`[data-testid=` + id + `]`).Text()) }
	require.Equal(t, "15.0 GB / 25.8 GB", text("gpu-vram"))
	require.Equal(t, "44%", text("gpu-util"))
	require.Equal(t, "50 °C", text("gpu-temp"))
	require.Equal(t, "210 W", text("gpu-power"))
	require.Contains(t, text("gpu-profile"), "default (built in) · concurrency 2")
	require.Contains(t, text("gpu-budget"), "Committed 12.9 GB of a 21.5 GB budget")
	require.Contains(t, text("gpu-budget"), "×1.25")
	require.Contains(t, text("gpu-counters"), "1 out of memory")
	require.Contains(t, text("gpu-processes"), "pid 4001 6.4 GB")
	key, _ := card.Find(`[data-testid=gpu-charts]`).Attr("data-gpu-charts")
	require.Equal(t, "w1|"+testGPU, key)
	samplesURL, _ := card.Find(`[data-testid=gpu-charts]`).Attr("data-samples-url")
	require.Equal(t, "/admin/gpus/samples.json", samplesURL, "the charts' script polls the URL the page gives")

	rows := card.Find(`[data-testid=seat-row]`)
	require.Equal(t, 2, rows.Length())
	req := rows.First().Find(`[data-testid=seat-request]`)
	require.Contains(t, req.Text(), line.Text, "the seat names the line it renders")
	href, _ := req.Find("a").Attr("href")
	require.Equal(t, fmt.Sprintf("/projects/%d#line-%d", b.project.ID, line.ID), href)
	require.Contains(t, rows.First().Text(), "restarted 2 times")
	require.Contains(t, rows.Last().Text(), "idle")
	require.Equal(t, "lends its weights", rows.First().Find(`[data-testid=host-weights]`).Text())
	require.Equal(t, "borrows the weights", rows.Last().Find(`[data-testid=host-weights]`).Text())

	// The poll refreshes the live part out of band.
	live := doc(t, c.htmx("GET", "/admin/gpus/live", nil))
	oob := live.Find(`[hx-swap-oob]`)
	require.Equal(t, 1, oob.Length())
	v, _ := oob.Attr("hx-swap-oob")
	live0, _ := card.Find(`[data-testid=gpu-live]`).Attr("id")
	require.Equal(t, "outerHTML:#"+live0, v)
	require.Equal(t, "15.0 GB / 25.8 GB", strings.TrimSpace(oob.Find(`[data-testid=gpu-vram]`).Text()))

	// The charts' samples, newer than a point in time.
	var samples struct {
		GPUs []struct {
			Key    string  `json:"key"`
			Points [][]any `json:"points"`
		} `json:"gpus"`
	}
	resp := c.get("/admin/gpus/samples.json")
	require.Equal(t, "application/json", strings.Split(resp.Header.Get("Content-Type"), ";")[0])
	require.NoError(t, json.Unmarshal([]byte(body(t, resp)), &samples))
	require.Len(t, samples.GPUs, 1)
	require.Equal(t, "w1|"+testGPU, samples.GPUs[0].Key)
	require.Len(t, samples.GPUs[0].Points, 5)
	require.Len(t, samples.GPUs[0].Points[0], 6)
	second := int64(samples.GPUs[0].Points[1][0].(float64))
	require.NoError(t, json.Unmarshal([]byte(body(t, c.get(fmt.Sprintf("/admin/gpus/samples.json?since=%d", second)))), &samples))
	require.Len(t, samples.GPUs[0].Points, 3)

	// A worker that stopped is not shown.
	require.NoError(t, b.store.UnregisterWorker(context.Background(), "w1"))
	d = doc(t, c.get("/admin/gpus"))
	require.Zero(t, d.Find(`[data-testid=gpu-card]`).Length())
}

func profileForm(name string, kv ...string) url.Values {
	f := url.Values{"Name": {name}, "Concurrency": {"3"}, "ReservePct": {"15"}, "LongTextThresholdSec": {"15"},
		"LongLaneLimit": {"1"}, "MaxGenSeconds": {"30"}, "SegmentTokens": {"120"}, "FP16": {"on"}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

func TestGPUProfileFormValidatesInline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleAdmin)
	ctx := context.Background()

	resp := c.post("/admin/gpus/profiles", profileForm("tight", "ReservePct", "95", "Concurrency", "0", "MaxGenSeconds", "-1",
		"SegmentTokens", "many"), true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	d := doc(t, resp)
	row := d.Find(`[data-testid=new-profile]`)
	errText := func(field string) string { return row.Find(`[data-testid=error-` + field + `]`).Text() }
	require.Equal(t, "The reserve must be between 0% and 90% of the card's memory.", errText("ReservePct"))
	require.Equal(t, "The concurrency must be at least 1.", errText("Concurrency"))
	require.Equal(t, "Must be greater than zero.", errText("MaxGenSeconds"))
	require.Equal(t, "Enter a number.", errText("SegmentTokens"))
	require.Empty(t, errText("Name"))
	val, _ := row.Find(`input[name=ReservePct]`).Attr("value")
	require.Equal(t, "95", val, "what was typed stays")
	ps, err := b.store.GPUProfiles(ctx)
	require.NoError(t, err)
	require.Empty(t, ps)

	resp = c.post("/admin/gpus/profiles", profileForm("h200-fast"), true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	d = doc(t, c.get(resp.Header.Get("Location")))
	require.Contains(t, d.Find(`[data-testid=notice]`).Text(), "Profile h200-fast saved")
	ps, err = b.store.GPUProfiles(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, 3, ps[0].Concurrency)
	require.True(t, ps[0].FP16)
	require.False(t, ps[0].EmotionTextModel)
	require.False(t, ps[0].ShareWeights)

	// The same name twice, inline.
	resp = c.post("/admin/gpus/profiles", profileForm("h200-fast"), true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Equal(t, "Another profile has this name.", doc(t, resp).Find(`[data-testid=new-profile] [data-testid=error-Name]`).Text())

	// Editing: the lane may not exceed the concurrency; the error shows in that profile's row.
	path := fmt.Sprintf("/admin/gpus/profiles/%d", ps[0].ID)
	resp = c.post(path, profileForm("h200-fast", "LongLaneLimit", "5"), true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	d = doc(t, resp)
	require.Contains(t, d.Find(`[data-testid=profile-row] [data-testid=error-LongLaneLimit]`).Text(), "between 1 and 3")
	resp = c.post(path, profileForm("h200-fast", "Concurrency", "6", "EmotionTextModel", "on", "ShareWeights", "on"), true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	p, err := b.store.GPUProfileByID(ctx, ps[0].ID)
	require.NoError(t, err)
	require.Equal(t, 6, p.Concurrency)
	require.True(t, p.EmotionTextModel)
	require.True(t, p.ShareWeights)
	checked := doc(t, c.get("/admin/gpus")).Find(`[data-testid=profile-row] input[name=ShareWeights][checked]`)
	require.Equal(t, 1, checked.Length(), "the form shows the stored flag")

	require.Equal(t, http.StatusSeeOther, c.post(path+"/delete", nil, true).StatusCode)
	ps, err = b.store.GPUProfiles(ctx)
	require.NoError(t, err)
	require.Empty(t, ps)
}

// A profile stored without beams or an s2mel precision (0 and "", as rows saved
// before those fields) is edited with the defaults they mean, gpu.Profile's own.
func TestGPUProfileFormShowsTheDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleAdmin)
	ctx := context.Background()
	sp := &studio.GPUProfile{GPUProfileSettings: studio.GPUProfileSettings{Name: "old", Concurrency: 2, ReservePct: 12.5,
		LongTextThresholdSec: 8, LongLaneLimit: 1, MaxGenSeconds: 12, SegmentTokens: 120, Batching: true}}
	require.NoError(t, b.store.SaveGPUProfile(ctx, b.users[studio.RoleAdmin].ID, sp))

	row := doc(t, c.get("/admin/gpus")).Find(`[data-testid=profile-row]`)
	require.Equal(t, 1, row.Length())
	value := func(name string) string {
		return row.Find(fmt.Sprintf(`input[name=%s]`, name)).AttrOr("value", "?")
	}
	require.Equal(t, fmt.Sprint(tts.DefaultBeams), value("Beams"))
	sel, _ := row.Find(`select[name=S2melPrecision] option[selected]`).Attr("value")
	require.Equal(t, gpu.S2melFP32, sel)
	require.Equal(t, "12.5", value("ReservePct"))
	require.Equal(t, "old", value("Name"))
}

// The s2mel precision is a choice on the profile form: bf16 needs batching (refused
// inline, in the user's language, nothing saved); saved, the form shows it selected.
func TestGPUProfileS2melPrecision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleAdmin)
	ctx := context.Background()

	d := doc(t, c.get("/admin/gpus"))
	sel, _ := d.Find(`[data-testid=new-profile] select[name=S2melPrecision] option[selected]`).Attr("value")
	require.Equal(t, "fp32", sel, "a new profile starts at fp32")
	require.Contains(t, d.Find(`[data-testid=profiles] th[title*="bf16"]`).AttrOr("title", ""), "thousandth", "the header says the effect")

	resp := c.post("/admin/gpus/profiles", profileForm("bf16-alone", "S2melPrecision", "bf16"), true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=new-profile] [data-testid=error-S2melPrecision]`).Text(),
		"needs a batching host")
	resp = c.post("/admin/gpus/profiles", profileForm("odd", "S2melPrecision", "fp8", "Batching", "on"), true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Equal(t, "The s2mel precision must be fp32 or bf16.",
		doc(t, resp).Find(`[data-testid=new-profile] [data-testid=error-S2melPrecision]`).Text())
	ps, err := b.store.GPUProfiles(ctx)
	require.NoError(t, err)
	require.Empty(t, ps)

	resp = c.post("/admin/gpus/profiles", profileForm("bf16", "S2melPrecision", "bf16", "Batching", "on"), true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	ps, err = b.store.GPUProfiles(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "bf16", ps[0].S2melPrecision)
	sel, _ = doc(t, c.get("/admin/gpus")).Find(`[data-testid=profile-row] select[name=S2melPrecision] option[selected]`).Attr("value")
	require.Equal(t, "bf16", sel, "the form shows the stored precision")

	require.Equal(t, http.StatusSeeOther, c.post("/me/lang", url.Values{"lang": {"zh"}}, true).StatusCode)
	resp = c.post(fmt.Sprintf("/admin/gpus/profiles/%d", ps[0].ID), profileForm("bf16", "S2melPrecision", "bf16"), true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=profile-row] [data-testid=error-S2melPrecision]`).Text(), "需要批处理")
	kept, err := b.store.GPUProfileByID(ctx, ps[0].ID)
	require.NoError(t, err)
	require.True(t, kept.Batching, "the refused edit changed nothing")
}

// A profile that cannot run one synthesis on a GPU it is assigned to is refused with the
// measured numbers, when assigned and when edited.
func TestGPUProfileThatCannotFitIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publishGPU(t, b)
	c := b.as(t, studio.RoleAdmin)
	ctx := context.Background()
	require.Equal(t, http.StatusSeeOther, c.post("/admin/gpus/profiles", profileForm("greedy", "ReservePct", "85"), true).StatusCode)
	require.Equal(t, http.StatusSeeOther, c.post("/admin/gpus/profiles", profileForm("fine"), true).StatusCode)
	ps, err := b.store.GPUProfiles(ctx)
	require.NoError(t, err)
	ids := map[string]int64{}
	for _, p := range ps {
		ids[p.Name] = p.ID
	}

	resp := c.post("/admin/gpus/assign", url.Values{"gpu_uuid": {testGPU}, "profile_id": {fmt.Sprint(ids["greedy"])}}, true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	msg := doc(t, resp).Find(`[data-testid=page-error]`).Text()
	require.Contains(t, msg, "cannot run even one synthesis")
	require.Contains(t, msg, "85% reserve", "with the numbers")
	require.Contains(t, msg, "NVIDIA L40S")
	as, err := b.store.GPUAssignments(ctx)
	require.NoError(t, err)
	require.Empty(t, as)

	resp = c.post("/admin/gpus/assign", url.Values{"gpu_uuid": {testGPU}, "profile_id": {fmt.Sprint(ids["fine"])}}, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	as, err = b.store.GPUAssignments(ctx)
	require.NoError(t, err)
	require.Len(t, as, 1)
	d := doc(t, c.get("/admin/gpus"))
	sel, _ := d.Find(`[data-testid=assign-form] option[selected]`).Attr("value")
	require.Equal(t, fmt.Sprint(ids["fine"]), sel)

	// Editing the assigned profile into one that cannot fit is refused too.
	resp = c.post(fmt.Sprintf("/admin/gpus/profiles/%d", ids["fine"]), profileForm("fine", "ReservePct", "88"), true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=profile-error]`).Text(), "cannot run even one synthesis")
	p, err := b.store.GPUProfileByID(ctx, ids["fine"])
	require.NoError(t, err)
	require.InDelta(t, 15, p.ReservePct, 1e-9)

	// Back to the default.
	require.Equal(t, http.StatusSeeOther, c.post("/admin/gpus/assign", url.Values{"gpu_uuid": {testGPU}, "profile_id": {"0"}}, true).StatusCode)
	as, err = b.store.GPUAssignments(ctx)
	require.NoError(t, err)
	require.Empty(t, as)
}

// simulatedCalibration runs a quick calibration on a simulated card.
func simulatedCalibration(t *testing.T, p gpu.Profile) *gpu.CalibrationResult {
	t.Helper()
	dev := simdev.New(24 * gpu.GiB)
	l := &ttshost.SimLauncher{Devices: map[string]*simdev.Device{testGPU: dev}, Config: tts.SimulatorConfig{FollowTarget: true}}
	res, err := calibrate.Run(context.Background(), calibrate.Config{
		GPU: gpu.Device{UUID: testGPU, Name: "NVIDIA L40S", TotalBytes: dev.Total()}, Profile: p, MaxConcurrency: 4,
		WorkDir: t.TempDir(),
		Launch: func(ctx context.Context, i int) (ttshost.EngineHost, error) {
			return l.LaunchHost(ctx, gpu.LaunchOpts{GPU: testGPU, ID: fmt.Sprint(i), Weights: p.WeightsRole(i)})
		},
	})
	require.NoError(t, err)
	return res
}

func TestCalibrationFromThePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publishGPU(t, b)
	c := b.as(t, studio.RoleAdmin)
	ctx := context.Background()
	require.Equal(t, http.StatusSeeOther, c.post("/admin/gpus/profiles", profileForm("cal", "MaxGenSeconds", "12",
		"LongTextThresholdSec", "8", "ShareWeights", "on"), true).StatusCode)
	ps, err := b.store.GPUProfiles(ctx)
	require.NoError(t, err)
	prof := ps[0]

	resp := c.post("/admin/gpus/calibrations", url.Values{"gpu_uuid": {"GPU-nowhere"}, "profile_id": {"0"}}, true)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "only a GPU a live worker has")
	resp = c.post("/admin/gpus/calibrations", url.Values{"gpu_uuid": {testGPU}, "profile_id": {fmt.Sprint(prof.ID)}}, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, doc(t, c.get(resp.Header.Get("Location"))).Find(`[data-testid=notice]`).Text(), "the worker that owns the GPU runs it")
	resp = c.post("/admin/gpus/calibrations", url.Values{"gpu_uuid": {testGPU}, "profile_id": {"0"}}, true)
	require.Equal(t, http.StatusConflict, resp.StatusCode, "one at a time")

	cs, err := b.store.GPUCalibrations(ctx, 5)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	cal := cs[0]
	page := fmt.Sprintf("/admin/gpus/calibrations/%d", cal.ID)
	d := doc(t, c.get(page))
	require.Equal(t, "waiting for the worker", d.Find(`[data-testid=calibration-status]`).Text())
	require.Zero(t, d.Find(`[data-testid=apply-calibration]`).Length())

	// The worker claims it, reports progress and finishes it.
	claimed, err := b.store.ClaimGPUCalibrations(ctx, "w1", []string{testGPU})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.NoError(t, b.store.SetGPUCalibrationProgress(ctx, cal.ID, `{"key":"gpu.calibration.progress.step","args":[3]}`))
	d = doc(t, c.get("/admin/gpus"))
	require.Contains(t, d.Find(`[data-testid=calibration-row]`).Text(), "Load test at concurrency 3")
	res := simulatedCalibration(t, fleet.ProfileOf(prof))
	data, err := json.Marshal(res)
	require.NoError(t, err)
	require.NoError(t, b.store.FinishGPUCalibration(ctx, cal.ID, data, ""))

	d = doc(t, c.get(page))
	require.Equal(t, "done", d.Find(`[data-testid=calibration-status]`).Text())
	require.Contains(t, d.Find(`[data-testid=calibration-memory]`).Text(), "4.3 GB after load")
	require.Contains(t, d.Find(`[data-testid=calibration-borrower]`).Text(), "borrows the first's weights holds 0.6 GB")
	require.Equal(t, len(res.Analysis), d.Find(`[data-testid=bucket-row]`).Length())
	require.Equal(t, len(res.Verdict.Steps), d.Find(`[data-testid=step-row]`).Length())
	chart, _ := d.Find(`[data-testid=calibration-chart]`).Attr("data-calibration-chart")
	var pts []map[string]float64
	require.NoError(t, json.Unmarshal([]byte(chart), &pts))
	require.Len(t, pts, len(res.Verdict.Steps))
	require.Contains(t, d.Find(`[data-testid=calibration-verdict]`).Text(), fmt.Sprintf("recommended: concurrency %d", res.Recommended))
	apply := d.Find(`[data-testid=apply-calibration]`)
	require.Equal(t, fmt.Sprintf("Apply: concurrency %d", res.Recommended), apply.Text())

	resp = c.post(page+"/apply", nil, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, doc(t, c.get(resp.Header.Get("Location"))).Find(`[data-testid=notice]`).Text(),
		fmt.Sprintf("runs profile cal at concurrency %d", res.Recommended))
	p, err := b.store.GPUProfileByID(ctx, prof.ID)
	require.NoError(t, err)
	require.Equal(t, res.Recommended, p.Concurrency)
	settings, err := b.store.GPUSettings(ctx, []string{testGPU})
	require.NoError(t, err)
	require.Equal(t, cal.ID, *settings[testGPU].CalibrationID, "the GPU predicts with the measured curve")
}

// simulatedBatchCalibration calibrates profile p (batching) on a batching simulator.
func simulatedBatchCalibration(t *testing.T, p gpu.Profile) *gpu.CalibrationResult {
	t.Helper()
	dev := simdev.New(24 * gpu.GiB)
	l := &ttshost.SimLauncher{Devices: map[string]*simdev.Device{testGPU: dev},
		Config:  tts.SimulatorConfig{FollowTarget: true, TokensPerSecond: 20000, Batch: &tts.SimBatch{}},
		Profile: func(string) gpu.Profile { return p }}
	res, err := calibrate.Run(context.Background(), calibrate.Config{
		GPU: gpu.Device{UUID: testGPU, Name: "NVIDIA L40S", TotalBytes: dev.Total()}, Profile: p, MaxConcurrency: 4,
		WorkDir: t.TempDir(),
		Launch: func(ctx context.Context, i int) (ttshost.EngineHost, error) {
			return l.LaunchHost(ctx, gpu.LaunchOpts{GPU: testGPU, ID: fmt.Sprint(i)})
		},
	})
	require.NoError(t, err)
	require.NotNil(t, res.Batch)
	return res
}

// A batching profile is calibrated from the page as a process one is; its page
// shows the host's batch, each length's KV, latency per audio second and the
// latency point, and applying it sets the host's maximum sequences.
func TestBatchingCalibrationFromThePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publishGPU(t, b)
	c := b.as(t, studio.RoleAdmin)
	ctx := context.Background()
	sp := &studio.GPUProfile{GPUProfileSettings: studio.GPUProfileSettings{Name: "batch", Concurrency: 16, ReservePct: 10,
		LongTextThresholdSec: 8, LongLaneLimit: 1, MaxGenSeconds: 12, SegmentTokens: 120, FP16: true, Batching: true, Beams: 3}}
	require.NoError(t, b.store.SaveGPUProfile(ctx, b.users[studio.RoleAdmin].ID, sp))

	resp := c.post("/admin/gpus/calibrations", url.Values{"gpu_uuid": {testGPU}, "profile_id": {fmt.Sprint(sp.ID)}}, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a batching profile can be calibrated")
	cs, err := b.store.GPUCalibrations(ctx, 5)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	cal := cs[0]
	_, err = b.store.ClaimGPUCalibrations(ctx, "w1", []string{testGPU})
	require.NoError(t, err)
	res := simulatedBatchCalibration(t, fleet.ProfileOf(*sp))
	data, err := json.Marshal(res)
	require.NoError(t, err)
	require.NoError(t, b.store.FinishGPUCalibration(ctx, cal.ID, data, ""))

	page := fmt.Sprintf("/admin/gpus/calibrations/%d", cal.ID)
	d := doc(t, c.get(page))
	require.Contains(t, d.Find(`[data-testid=calibration-batch]`).Text(), "A batching host: one process, its weights and a KV pool of 4.00 GB")
	require.Contains(t, d.Find(`[data-testid=calibration-batch]`).Text(), "lines at once at most: 16")
	require.Equal(t, len(res.Analysis), d.Find(`[data-testid=bucket-kv]`).Length())
	require.Equal(t, len(res.Verdict.Steps), d.Find(`[data-testid=step-row]`).Length())
	// The simulator runs in real time: on a loaded machine its steps may come out flat,
	// and one line at once is recommended (the message's singular).
	lines := fmt.Sprintf("at most %d lines at once on the one host", res.Recommended)
	if res.Recommended == 1 {
		lines = "at most 1 line at once on the one host"
	}
	require.Contains(t, d.Find(`[data-testid=calibration-latency-point]`).Text(), lines)
	require.Equal(t, fmt.Sprintf("Apply: concurrency %d", res.Recommended), d.Find(`[data-testid=apply-calibration]`).Text())

	resp = c.post(page+"/apply", nil, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	p, err := b.store.GPUProfileByID(ctx, sp.ID)
	require.NoError(t, err)
	require.Equal(t, res.Recommended, p.Concurrency)
	require.True(t, p.Batching)
}

// publishBatch registers worker w1 with one H200 under a batching profile of 64
// sequences and publishes its live state: batch now, recent its readings.
func publishBatch(t *testing.T, b *testBundle, now time.Time, batch *gpu.LiveBatch, recent []gpu.BatchPoint) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.store.RegisterWorker(ctx, studio.WorkerInfo{Name: "w1", Host: "gpu-box", PID: 7, Engines: []string{"bench"}, Concurrency: 64}))
	p := gpu.DefaultProfile()
	p.Batching, p.Concurrency = true, 64
	st := gpu.LiveState{Worker: "w1", Host: "gpu-box", At: now, Engine: "bench",
		GPUs: []gpu.LiveGPU{{
			Device:   gpu.Device{Index: 0, UUID: testGPU, Name: "NVIDIA H200", TotalBytes: 140 << 30},
			Snapshot: gpu.GPUSnapshot{UUID: testGPU, Name: "NVIDIA H200", Profile: p, TotalBytes: 140 << 30},
			Batch:    batch, BatchRecent: recent,
		}}}
	data, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, b.store.PublishGPULive(ctx, "w1", "gpu-box", data))
}

// A batching host whose paged-attention kernel failed its start-up check, and whose
// vocoder runs its activations in plain steps though one kernel each was asked for:
// the GPU card warns of both, with the host's reasons.
func TestGPUPageWarnsWhenAttentionGathers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publishBatch(t, b, time.Now(), &gpu.LiveBatch{MaxSequences: 64, Beams: 3, Decode: "beam_search", KVBytesPerToken: 122_880,
		TokensPerAudioSecond: 50, KVCacheBytes: 8_000_000_000, KVFreeBytes: 8_000_000_000,
		PagedAttentionOff: "head size 80 or torch.float16 is not one the kernel takes",
		VocoderKernel:     "torch", VocoderKernelOff: "BigVGAN's CUDA kernel did not build"}, nil)

	d := doc(t, b.as(t, studio.RoleAdmin).get("/admin/gpus"))
	warn := d.Find(`[data-testid=batch-attention]`)
	require.True(t, warn.HasClass("warn"))
	require.Contains(t, warn.Text(), "Attention copies each line's KV cache every step")
	require.Contains(t, warn.Text(), "head size 80 or torch.float16 is not one the kernel takes")
	warn = d.Find(`[data-testid=batch-vocoder]`)
	require.True(t, warn.HasClass("warn"))
	require.Contains(t, warn.Text(), "The vocoder's activations run in plain steps (slower)")
	require.Contains(t, warn.Text(), "BigVGAN's CUDA kernel did not build")
}

// A GPU whose batching host published its batch: the live part shows the sequences
// by stage, the decode rate and memory per sequence (in both languages), the card
// carries the batch charts, and the samples carry the batch readings, newer than
// ?batch_since.
func TestGPUPageShowsTheBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	batch := &gpu.LiveBatch{MaxSequences: 64, Beams: 3, Decode: "beam_search", Decoding: 40, InS2Mel: 6, Waiting: 2, DecodeTokensPerSecond: 2950.4,
		KVBytesPerToken: 122_880, TokensPerAudioSecond: 50, PrefixTokens: 32, ActivationBytesPerSecond: 12_000_000,
		KVCacheBytes: 8_000_000_000, KVFreeBytes: 6_000_000_000, BatchRowsMax: 144, Steps: 9000,
		DecodeGraphs: 209, GraphSteps: 8550, GraphPoolBytes: 3_400_000_000, PagedAttention: true, VocoderKernel: "fused"}
	var recent []gpu.BatchPoint
	for i := range 4 {
		bt := *batch
		bt.Decoding = 10 * (i + 1)
		recent = append(recent, bt.PointOf(now.Add(time.Duration(i-4)*2*time.Second)))
	}
	publishBatch(t, b, now, batch, recent)

	c := b.as(t, studio.RoleAdmin)
	d := doc(t, c.get("/admin/gpus"))
	card := d.Find(`[data-testid=gpu-card]`)
	text := func(id string) string { return strings.TrimSpace(card.Find(`[data-testid=` + id + `]`).Text()) }
	require.Equal(t, "40 / 64", text("batch-decoding"))
	require.Equal(t, "6", text("batch-s2mel"))
	require.Equal(t, "2", text("batch-waiting"))
	require.Equal(t, "2950 tok/s", text("batch-tokens"))
	require.Equal(t, "2.00 GB / 8.00 GB", text("batch-kv"))
	// 122,880 B x 3 beams x 50 tokens = 18.4 MB of KV per audio second; 2 GB over
	// 40 sequences = 50 MB each now.
	require.Contains(t, text("batch-memory"), "KV 123 KB per token x 3 beams x 50 tokens per audio second = 18.4 MB per audio second")
	require.Contains(t, text("batch-memory"), "activations 12.0 MB per audio second")
	require.Contains(t, text("batch-memory"), "now 50.0 MB of KV per decoding sequence")
	require.Contains(t, text("batch-rows"), "At most 144 rows")
	require.Equal(t, "beam search", text("batch-decode"))
	require.Equal(t, "Decode step as 209 CUDA graphs (pool 3.40 GB): 95% of steps replayed one", text("batch-graphs"))
	require.Equal(t, "Attention reads the KV cache in place", text("batch-attention"))
	require.Equal(t, "The vocoder's activations run as one kernel each", text("batch-vocoder"))
	charts := card.Find(`[data-testid=batch-charts]`)
	require.Equal(t, 1, charts.Length())
	key, _ := charts.Attr("data-batch-charts")
	require.Equal(t, "w1|"+testGPU, key)
	label, _ := charts.Attr("data-label-waiting")
	require.Equal(t, "Waiting in the host", label)

	// The poll's live part has the batch too.
	live := doc(t, c.htmx("GET", "/admin/gpus/live", nil))
	require.Equal(t, "40 / 64", strings.TrimSpace(live.Find(`[data-testid=batch-decoding]`).Text()))

	var samples struct {
		GPUs []struct {
			Batch [][]float64 `json:"batch"`
		} `json:"gpus"`
	}
	require.NoError(t, json.Unmarshal([]byte(body(t, c.get("/admin/gpus/samples.json"))), &samples))
	require.Len(t, samples.GPUs[0].Batch, 4)
	require.Equal(t, []float64{float64(recent[0].T), 10, 6, 2, 2950.4, 2e9}, samples.GPUs[0].Batch[0])
	require.NoError(t, json.Unmarshal([]byte(body(t, c.get(fmt.Sprintf("/admin/gpus/samples.json?since=%d&batch_since=%d",
		now.UnixMilli(), recent[1].T)))), &samples))
	require.Len(t, samples.GPUs[0].Batch, 2)

	// In Chinese.
	require.Equal(t, http.StatusSeeOther, c.post("/me/lang", url.Values{"lang": {"zh"}}, true).StatusCode)
	d = doc(t, c.get("/admin/gpus"))
	require.Contains(t, d.Find(`[data-testid=batch-memory]`).Text(), "每序列显存")
	require.Contains(t, d.Find(`[data-testid=gpu-batch]`).Text(), "主机内等待")
	require.Equal(t, "束搜索", strings.TrimSpace(d.Find(`[data-testid=batch-decode]`).Text()))
}
