package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/fleet"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// The agent applies an admin's profile live, publishes the GPUs, stores history and
// runs a requested calibration on the GPU it owns.
func TestGPUAgent(t *testing.T) {
	t.Parallel()
	store := studiotest.Store(t)
	admin := studiotest.User(t, store, studio.RoleAdmin)
	ctx := context.Background()
	b := setupSimGPUs(t, simGPUsOpts{})
	b.serving(t, 2)
	require.NoError(t, store.RegisterWorker(ctx, studio.WorkerInfo{Name: "w-gpu", Host: "box", PID: 1, Engines: []string{"simulator"}}))
	agent := fleet.NewAgent(store, b.gpus, fleet.AgentConfig{Worker: "w-gpu", Host: "box"})

	sp := &studio.GPUProfile{GPUProfileSettings: studio.GPUProfileSettings{Name: "three", Concurrency: 3, ReservePct: 10,
		LongTextThresholdSec: 3, LongLaneLimit: 1, MaxGenSeconds: 6, SegmentTokens: 120, FP16: true}}
	require.NoError(t, store.SaveGPUProfile(ctx, admin.ID, sp))
	require.NoError(t, store.AssignGPUProfile(ctx, admin.ID, simGPU, sp.ID))
	require.NoError(t, agent.ApplySettings(ctx))
	snap := b.serving(t, 3)
	require.Equal(t, "three", snap.Profile.Name)

	agent.Publish(ctx)
	live, err := store.GPULiveStates(ctx)
	require.NoError(t, err)
	require.Len(t, live, 1)
	st, err := fleet.DecodeState(live[0].State)
	require.NoError(t, err)
	require.Equal(t, "w-gpu", st.Worker)
	require.Len(t, st.GPUs, 1)
	require.Equal(t, simGPU, st.GPUs[0].UUID)
	require.Equal(t, sp.ID, st.GPUs[0].ProfileID)
	require.Len(t, st.GPUs[0].Pool, 3)

	agent.SaveHistory(ctx, time.Now().Add(time.Minute))
	hist, err := store.GPUHistory(ctx, simGPU, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	require.Equal(t, "box", hist[0].Host)

	c, err := store.RequestGPUCalibration(ctx, admin.ID, simGPU, "Simulated", *sp)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); agent.Run(runCtx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := store.GPUCalibrationByID(ctx, c.ID)
		require.NoError(t, err)
		if !got.Active() {
			require.Equal(t, studio.CalibrationDone, got.Status, got.Error)
			res, err := fleet.DecodeCalibration(got.Result)
			require.NoError(t, err)
			require.Positive(t, res.Recommended)
			require.Equal(t, "three", res.Profile.Name)
			break
		}
		require.True(t, time.Now().Before(deadline), "calibration never finished: %s", got.Progress)
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	b.serving(t, 3)
}
