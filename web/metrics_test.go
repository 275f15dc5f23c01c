package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// metrics parses a /metrics answer into its families.
func metrics(t *testing.T, resp *http.Response) map[string]*familyView {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	out := map[string]*familyView{}
	for name, f := range fams {
		fv := &familyView{}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := 0.0
			switch {
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Histogram != nil:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			fv.samples = append(fv.samples, sample{labels, v})
		}
		out[name] = fv
	}
	return out
}

type sample struct {
	labels map[string]string
	value  float64
}

type familyView struct{ samples []sample }

// get returns the value of the sample whose labels include kv.
func (f *familyView) get(t *testing.T, kv ...string) float64 {
	t.Helper()
	require.NotNil(t, f)
	for _, s := range f.samples {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			ok = ok && s.labels[kv[i]] == kv[i+1]
		}
		if ok {
			return s.value
		}
	}
	t.Fatalf("no sample with %v", kv)
	return 0
}

func TestMetricsNeedTheTokenOrAnAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.anon(t).get("/metrics")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
	require.Equal(t, http.StatusForbidden, b.as(t, studio.RoleManager).get("/metrics").StatusCode)
	metrics(t, b.as(t, studio.RoleAdmin).get("/metrics"))

	// Without METRICS_TOKEN no token opens it; with it, only the right one does.
	anon := b.anon(t)
	require.Equal(t, http.StatusUnauthorized, anon.do("GET", "/metrics", nil, "", map[string]string{"Authorization": "Bearer "}).StatusCode)
	b.cfg.MetricsToken = strings.Repeat("s", 24)
	require.Equal(t, http.StatusUnauthorized, anon.do("GET", "/metrics", nil, "", map[string]string{"Authorization": "Bearer wrong-token-wrong"}).StatusCode)
	metrics(t, anon.do("GET", "/metrics", nil, "", map[string]string{"Authorization": "Bearer " + b.cfg.MetricsToken}))
}

func TestMetricsExportGPUsQueueAndLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publishGPU(t, b)
	ctx := context.Background()
	_, err := b.store.Pool().Exec(ctx, `UPDATE lines SET attempts = 3, state = 'failed' WHERE id = (SELECT min(id) FROM lines WHERE project_id = $1)`, b.project.ID)
	require.NoError(t, err)
	_, err = b.store.Pool().Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state) VALUES ('{}', 'synthesize_line', 5, 'synthesis', 'available')`)
	require.NoError(t, err)

	m := metrics(t, b.as(t, studio.RoleAdmin).get("/metrics"))
	g := []string{"worker", "w1", "gpu", testGPU, "host", "gpu-box", "index", "0", "name", "NVIDIA L40S"}
	require.EqualValues(t, 14<<30, m["dubstudio_gpu_memory_used_bytes"].get(t, g...))
	require.EqualValues(t, 24<<30, m["dubstudio_gpu_memory_total_bytes"].get(t, g...))
	require.EqualValues(t, 44, m["dubstudio_gpu_utilization_percent"].get(t, g...))
	require.EqualValues(t, 50, m["dubstudio_gpu_temperature_celsius"].get(t, g...))
	require.InDelta(t, 210.5, m["dubstudio_gpu_power_watts"].get(t, g...), 1e-9)
	require.EqualValues(t, 20<<30, m["dubstudio_gpu_budget_bytes"].get(t, g...))
	require.EqualValues(t, 12<<30, m["dubstudio_gpu_committed_bytes"].get(t, g...))
	require.InDelta(t, 1.25, m["dubstudio_gpu_safety_factor"].get(t, g...), 1e-9)
	require.EqualValues(t, 1, m["dubstudio_gpu_oom_total"].get(t, g...))
	require.EqualValues(t, 2, m["dubstudio_gpu_retries_total"].get(t, "reason", "host_died"))
	require.EqualValues(t, 1, m["dubstudio_gpu_retries_total"].get(t, "reason", "out_of_memory"))
	require.EqualValues(t, 2, m["dubstudio_gpu_model_hosts"].get(t, "state", "serving"))
	require.EqualValues(t, 1, m["dubstudio_gpu_running"].get(t, "lane", "normal"))
	require.EqualValues(t, 3, m["dubstudio_gpu_waiting_requests"].get(t, "worker", "w1"))
	require.EqualValues(t, 1, m["dubstudio_queue_jobs"].get(t, "queue", "synthesis", "state", "available"))
	require.EqualValues(t, 1, m["dubstudio_lines"].get(t, "state", "failed"))
	require.EqualValues(t, 2, m["dubstudio_lines"].get(t, "state", "draft"))
	require.EqualValues(t, 2, m["dubstudio_line_retries"].get(t))
	require.Zero(t, m["dubstudio_synthesis_seconds"].get(t), "no take yet")
}
