package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/studio"
)

// publishWorkerGPU registers a worker and publishes one GPU of it using usedGiB.
func publishWorkerGPU(t *testing.T, b *testBundle, worker, host, uuid string, usedGiB int64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.store.RegisterWorker(ctx, studio.WorkerInfo{Name: worker, Host: host, PID: 7, Engines: []string{"indextts"}, Concurrency: 1}))
	now := time.Now()
	pt := gpu.Point{T: now.UnixMilli(), UsedBytes: usedGiB << 30, TotalBytes: 24 << 30, GPUPercent: 10, TempC: 40, PowerWatts: 100}
	st := gpu.LiveState{Worker: worker, Host: host, At: now, Engine: "indextts",
		GPUs: []gpu.LiveGPU{{Device: gpu.Device{UUID: uuid, Name: "NVIDIA L40S", TotalBytes: 24 << 30}, Latest: &pt,
			Recent: []gpu.Point{pt}, Snapshot: gpu.GPUSnapshot{UUID: uuid, Name: "NVIDIA L40S", Profile: gpu.DefaultProfile(),
				TotalBytes: 24 << 30, BudgetBytes: 20 << 30, SafetyFactor: 1}}}}
	data, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, b.store.PublishGPULive(ctx, worker, host, data))
}

// The poll's live parts land in the card of the GPU they describe: when a worker
// stops (or one appears), the other GPUs' numbers do not move into its card.
func TestGPULiveUpdateKeepsEachGPUsCard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publishWorkerGPU(t, b, "w-a", "a-box", "GPU-aaaa", 3)
	publishWorkerGPU(t, b, "w-b", "b-box", "GPU-bbbb", 17)
	c := b.as(t, studio.RoleAdmin)

	// The page: the live part of each card, by the GPU's UUID.
	page := doc(t, c.get("/admin/gpus"))
	liveOf := map[string]string{}
	cards := page.Find(`[data-testid=gpu-card]`)
	require.Equal(t, 2, cards.Length())
	for i := range cards.Length() {
		card := cards.Eq(i)
		uuid, _ := card.Attr("data-uuid")
		id, ok := card.Find(`[data-testid=gpu-live]`).Attr("id")
		require.True(t, ok)
		liveOf[uuid] = id
	}
	require.NotEqual(t, liveOf["GPU-aaaa"], liveOf["GPU-bbbb"])

	check := func(wantUUIDs ...string) {
		t.Helper()
		live := doc(t, c.htmx("GET", "/admin/gpus/live", nil))
		oob := live.Find(`[hx-swap-oob]`)
		require.Equal(t, len(wantUUIDs), oob.Length())
		used := map[string]string{"GPU-aaaa": "3.2 GB / 25.8 GB", "GPU-bbbb": "18.3 GB / 25.8 GB"}
		for i, uuid := range wantUUIDs {
			target, _ := oob.Eq(i).Attr("hx-swap-oob")
			require.Equal(t, "outerHTML:#"+liveOf[uuid], target, "the live part of %s goes to its own card", uuid)
			require.Equal(t, used[uuid], strings.TrimSpace(oob.Eq(i).Find(`[data-testid=gpu-vram]`).Text()))
		}
	}
	check("GPU-aaaa", "GPU-bbbb")

	// Worker a stops: b's numbers must not appear under a's GPU.
	require.NoError(t, b.store.UnregisterWorker(context.Background(), "w-a"))
	check("GPU-bbbb")
}
