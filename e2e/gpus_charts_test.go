package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// recordPlots makes the page keep every uPlot chart it draws in window.__plots, so
// that a test can read the points a chart holds.
const recordPlots = `(function () {
  var real;
  window.__plots = [];
  function recorded(opts, data, el) { var u = new real(opts, data, el); window.__plots.push(u); return u; }
  Object.defineProperty(window, "uPlot", { configurable: true,
    get: function () { return real && recorded; },
    set: function (v) { real = v; Object.keys(v).forEach(function (k) { recorded[k] = v[k]; }); } });
})();`

// publishSamples registers a worker and publishes one GPU with five samples a second
// apart, the last at clock (the worker's clock).
func publishSamples(t *testing.T, store *studio.Store, worker, host, uuid string, clock time.Time) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, store.RegisterWorker(ctx, studio.WorkerInfo{Name: worker, Host: host, PID: 7, Engines: []string{"indextts"}, Concurrency: 1}))
	var recent []gpu.Point
	for i := range 5 {
		recent = append(recent, gpu.Point{T: clock.Add(time.Duration(i-4) * time.Second).UnixMilli(), UsedBytes: int64(5+i) << 30,
			TotalBytes: 24 << 30, GPUPercent: 10 * i, TempC: 50, PowerWatts: 150})
	}
	latest := recent[len(recent)-1]
	st := gpu.LiveState{Worker: worker, Host: host, At: clock, Engine: "indextts",
		GPUs: []gpu.LiveGPU{{Device: gpu.Device{UUID: uuid, Name: "NVIDIA L40S", TotalBytes: 24 << 30}, Latest: &latest,
			Recent: recent, Snapshot: gpu.GPUSnapshot{UUID: uuid, Name: "NVIDIA L40S", Profile: gpu.DefaultProfile(),
				TotalBytes: 24 << 30, BudgetBytes: 20 << 30, SafetyFactor: 1}}}}
	data, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, store.PublishGPULive(ctx, worker, host, data))
}

// TestGPUChartsOfEveryWorkerMove: two workers whose clocks differ (by 30 s here; by
// less, or publishing at other moments, the same happens to a part of the samples)
// each get their new samples drawn. With one "since" for every GPU, the newest
// sample of the worker ahead hid every later sample of the other one: its charts
// stopped after the first poll.
func TestGPUChartsOfEveryWorkerMove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := studiotest.User(t, b.store, studio.RoleAdmin)
	now := time.Now()
	publishSamples(t, b.store, "w-ahead", "a-box", "GPU-aaaa", now)
	publishSamples(t, b.store, "w-behind", "b-box", "GPU-bbbb", now.Add(-30*time.Second))

	ctx := browser(t)
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordPlots})
	require.NoError(t, err)
	points := func(key string) string {
		// The points of the key's VRAM chart (its first).
		return fmt.Sprintf(`(() => { const u = (window.__plots || []).find(u => u.root.closest('[data-gpu-charts=%q]'));
			return u ? u.data[0].length : -1; })()`, key)
	}
	require.NoError(t, chromedp.Do(ctx, login(b, admin)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(b.server.URL+"/admin/gpus"),
		chromedp.WaitVisible(css(`[data-gpu-charts="w-behind|GPU-bbbb"][data-ready=true]`)),
	))
	for _, key := range []string{"w-ahead|GPU-aaaa", "w-behind|GPU-bbbb"} {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](points(key)+` === 5`, chromedp.WithPollingTimeout(10*time.Second)))
		require.NoError(t, err, "the first poll draws %s's samples", key)
	}

	// Both publish again, each five samples later on its own clock.
	later := now.Add(5 * time.Second)
	publishSamples(t, b.store, "w-ahead", "a-box", "GPU-aaaa", later)
	publishSamples(t, b.store, "w-behind", "b-box", "GPU-bbbb", later.Add(-30*time.Second))
	for _, key := range []string{"w-ahead|GPU-aaaa", "w-behind|GPU-bbbb"} {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](points(key)+` === 10`, chromedp.WithPollingTimeout(10*time.Second)))
		require.NoError(t, err, "the next polls draw %s's new samples", key)
	}
}
