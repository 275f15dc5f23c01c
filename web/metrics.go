package web

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/studio"
)

// Prometheus metrics at /metrics. Everything is read from the database at scrape
// time, so that any web server shows every worker: GPUs from the state workers
// publish every two seconds, queue depth from River's jobs, lines by state, and
// synthesis latency from the takes. Who may read them: a scraper that sends
// METRICS_TOKEN as a bearer token, or an admin's session (docs/gpu.md).

// synthesisBuckets are the synthesis latency histogram's bounds, in seconds.
var synthesisBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("dubstudio_"+name, help, labels, nil)
}

var gpuLabels = []string{"worker", "host", "gpu", "index", "name"}

var (
	descQueue       = desc("queue_jobs", "River jobs by queue and state.", "queue", "state")
	descLines       = desc("lines", "Lines by state.", "state")
	descLineRetries = desc("line_retries", "Attempts beyond the first of the lines' current renders.")
	descSynthesis   = desc("synthesis_seconds", "Time the engine took to synthesize a take (every take kept).")
	descWorkerUp    = desc("worker_up", "1 for each live worker that publishes its GPUs.", "worker", "host", "engine")
	descWaiting     = desc("gpu_waiting_requests", "Lines waiting for a GPU seat.", "worker")
	descNeverFits   = desc("gpu_never_fits_total", "Lines refused because no GPU could ever run them.", "worker")

	descUsed        = desc("gpu_memory_used_bytes", "GPU memory used (NVML).", gpuLabels...)
	descTotal       = desc("gpu_memory_total_bytes", "GPU memory (NVML).", gpuLabels...)
	descUtil        = desc("gpu_utilization_percent", "GPU utilisation over the driver's last sample period.", gpuLabels...)
	descTemp        = desc("gpu_temperature_celsius", "GPU core temperature.", gpuLabels...)
	descPower       = desc("gpu_power_watts", "GPU board power draw.", gpuLabels...)
	descLost        = desc("gpu_lost", "1 when the GPU stopped answering.", gpuLabels...)
	descBudget      = desc("gpu_budget_bytes", "Memory the executor may commit: total × (1 − reserve) − others' memory.", gpuLabels...)
	descCommitted   = desc("gpu_committed_bytes", "Memory committed: models, caches and predicted peaks in flight.", gpuLabels...)
	descForeign     = desc("gpu_foreign_bytes", "GPU memory held by processes that are not our model hosts.", gpuLabels...)
	descSafety      = desc("gpu_safety_factor", "Factor on predicted peaks (rises after an OOM).", gpuLabels...)
	descConcurrency = desc("gpu_concurrency", "Syntheses the GPU's profile runs at once.", gpuLabels...)
	descRunning     = desc("gpu_running", "Syntheses running, by lane.", append(append([]string{}, gpuLabels...), "lane")...)
	descHosts       = desc("gpu_model_hosts", "Model-host processes by state.", append(append([]string{}, gpuLabels...), "state")...)
	descAdmitted    = desc("gpu_admitted_total", "Syntheses admitted.", gpuLabels...)
	descCompleted   = desc("gpu_completed_total", "Syntheses that completed.", gpuLabels...)
	descFailed      = desc("gpu_failed_total", "Syntheses that failed.", gpuLabels...)
	descOOMs        = desc("gpu_oom_total", "CUDA out-of-memory failures.", gpuLabels...)
	descRetries     = desc("gpu_retries_total", "Syntheses to run again, by reason.", append(append([]string{}, gpuLabels...), "reason")...)
	descReleases    = desc("gpu_cache_releases_total", "Requests to model hosts to release their cache.", gpuLabels...)
	descWaitSec     = desc("gpu_wait_seconds_total", "Time admitted syntheses waited for a seat.", gpuLabels...)
)

// metricsCollector reads the metrics from the store at each scrape.
type metricsCollector struct {
	s *Server
}

func (m metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueue, descLines, descLineRetries, descSynthesis, descWorkerUp, descWaiting,
		descNeverFits, descUsed, descTotal, descUtil, descTemp, descPower, descLost, descBudget, descCommitted,
		descForeign, descSafety, descConcurrency, descRunning, descHosts, descAdmitted, descCompleted, descFailed, descOOMs,
		descRetries, descReleases, descWaitSec} {
		ch <- d
	}
}

func (m metricsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := m.s.store
	fail := func(d *prometheus.Desc, err error) { ch <- prometheus.NewInvalidMetric(d, err) }
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}

	if qs, err := st.QueueCounts(ctx); err != nil {
		fail(descQueue, err)
	} else {
		for _, q := range qs {
			gauge(descQueue, float64(q.Count), q.Queue, q.State)
		}
	}
	if ls, err := st.LineStateCounts(ctx); err != nil {
		fail(descLines, err)
	} else {
		for _, state := range studio.LineStates {
			gauge(descLines, float64(ls[state]), string(state))
		}
	}
	if n, err := st.LineRetries(ctx); err != nil {
		fail(descLineRetries, err)
	} else {
		gauge(descLineRetries, float64(n))
	}
	if n, sum, buckets, err := st.SynthesisHistogram(ctx, synthesisBuckets); err != nil {
		fail(descSynthesis, err)
	} else {
		ch <- prometheus.MustNewConstHistogram(descSynthesis, n, sum, buckets)
	}

	states, err := st.GPULiveStates(ctx)
	if err != nil {
		fail(descUsed, err)
		return
	}
	for _, l := range states {
		if !l.Alive() {
			continue
		}
		ls, err := fleet.DecodeState(l.State)
		if err != nil {
			continue
		}
		gauge(descWorkerUp, 1, l.Worker, l.Host, ls.Engine)
		gauge(descWaiting, float64(ls.Waiting), l.Worker)
		counter(descNeverFits, float64(ls.NeverFits), l.Worker)
		for _, g := range ls.GPUs {
			lv := []string{l.Worker, l.Host, g.UUID, strconv.Itoa(g.Index), g.Name}
			with := func(extra string) []string { return append(append([]string{}, lv...), extra) }
			lost := 0.0
			if g.Lost || g.Snapshot.Lost {
				lost = 1
			}
			gauge(descLost, lost, lv...)
			if p := g.Latest; p != nil {
				if p.Has(gpu.MetricMemory) {
					gauge(descUsed, float64(p.UsedBytes), lv...)
					gauge(descTotal, float64(p.TotalBytes), lv...)
				}
				if p.Has(gpu.MetricUtilization) {
					gauge(descUtil, float64(p.GPUPercent), lv...)
				}
				if p.Has(gpu.MetricTemperature) {
					gauge(descTemp, float64(p.TempC), lv...)
				}
				if p.Has(gpu.MetricPower) {
					gauge(descPower, p.PowerWatts, lv...)
				}
			}
			sn := g.Snapshot
			gauge(descBudget, float64(sn.BudgetBytes), lv...)
			gauge(descCommitted, float64(sn.CommittedBytes), lv...)
			gauge(descForeign, float64(sn.ForeignBytes), lv...)
			gauge(descSafety, sn.SafetyFactor, lv...)
			gauge(descConcurrency, float64(sn.Profile.Concurrency), lv...)
			gauge(descRunning, float64(sn.Running-sn.LongRunning), with("normal")...)
			gauge(descRunning, float64(sn.LongRunning), with("long")...)
			byState := map[gpu.HostState]int{}
			for _, h := range sn.Hosts {
				byState[h.State]++
			}
			for _, hs := range []gpu.HostState{gpu.HostStarting, gpu.HostServing, gpu.HostReleasing, gpu.HostDraining, gpu.HostDead} {
				gauge(descHosts, float64(byState[hs]), with(string(hs))...)
			}
			c := g.Counters
			counter(descAdmitted, float64(c.Admitted), lv...)
			counter(descCompleted, float64(c.Completed), lv...)
			counter(descFailed, float64(c.Failed), lv...)
			counter(descOOMs, float64(c.OOMs), lv...)
			counter(descRetries, float64(c.OOMs), with(string(gpu.ReasonOutOfMemory))...)
			counter(descRetries, float64(c.HostDeaths), with(string(gpu.ReasonHostDied))...)
			counter(descRetries, float64(c.LostLeases), with("lease_lost")...)
			counter(descReleases, float64(c.CacheReleases), lv...)
			counter(descWaitSec, c.WaitSeconds, lv...)
		}
	}
}

// metricsHandler serves /metrics for a scraper with the token or an admin.
func (s *Server) metricsHandler() echo.HandlerFunc {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metricsCollector{s: s}, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return func(c echo.Context) error {
		if !s.mayReadMetrics(c) {
			if currentUser(c) != nil {
				return echo.NewHTTPError(http.StatusForbidden)
			}
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="dubstudio metrics"`)
			return c.String(http.StatusUnauthorized, "unauthorized\n")
		}
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

// mayReadMetrics: the bearer token (METRICS_TOKEN) or an admin's session.
func (s *Server) mayReadMetrics(c echo.Context) bool {
	if tok := s.cfg.MetricsToken; tok != "" {
		got, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
		if ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(tok)) == 1 {
			return true
		}
	}
	u := currentUser(c)
	return u != nil && u.Role.AtLeast(studio.RoleAdmin)
}
