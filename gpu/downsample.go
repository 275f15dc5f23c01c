package gpu

import (
	"sort"
	"time"
)

// Aggregate summarises one device over one period (a minute, for history).
type Aggregate struct {
	UUID   string
	Index  int
	Start  time.Time
	Period time.Duration
	// Samples is how many samples fell in the period; Lost how many said the device
	// was lost.
	Samples, Lost int

	AvgUsedBytes, MaxUsedBytes int64
	TotalBytes                 int64
	AvgGPUPercent              float64
	MaxGPUPercent              int
	AvgTemperatureC            float64
	MaxTemperatureC            int
	AvgPowerWatts              float64
	MaxPowerWatts              float64
}

type aggAcc struct {
	a                               Aggregate
	nMem, nUtil, nTemp, nPower      int
	sumUsed                         int64
	sumUtil, sumTemp, sumPowerWatts float64
}

// Downsample groups samples by device and by period (aligned to multiples of period,
// e.g. whole minutes) and returns averages and maxima per group, ordered by device
// index, then time. Averages only count samples that carry the metric. The newest
// period may be incomplete: a caller that persists history should pass only samples
// older than the start of the current period. Period defaults to one minute.
func Downsample(samples []Sample, period time.Duration) []Aggregate {
	if period <= 0 {
		period = time.Minute
	}
	type key struct {
		uuid  string
		start int64
	}
	accs := map[key]*aggAcc{}
	for _, s := range samples {
		start := s.Time.Truncate(period)
		k := key{s.UUID, start.UnixNano()}
		acc := accs[k]
		if acc == nil {
			acc = &aggAcc{a: Aggregate{UUID: s.UUID, Index: s.Index, Start: start, Period: period}}
			accs[k] = acc
		}
		acc.a.Samples++
		if s.Lost {
			acc.a.Lost++
			continue
		}
		if s.Has(MetricMemory) {
			acc.nMem++
			acc.sumUsed += s.UsedBytes
			acc.a.MaxUsedBytes = max(acc.a.MaxUsedBytes, s.UsedBytes)
			acc.a.TotalBytes = max(acc.a.TotalBytes, s.TotalBytes)
		}
		if s.Has(MetricUtilization) {
			acc.nUtil++
			acc.sumUtil += float64(s.GPUPercent)
			acc.a.MaxGPUPercent = max(acc.a.MaxGPUPercent, s.GPUPercent)
		}
		if s.Has(MetricTemperature) {
			acc.nTemp++
			acc.sumTemp += float64(s.TemperatureC)
			acc.a.MaxTemperatureC = max(acc.a.MaxTemperatureC, s.TemperatureC)
		}
		if s.Has(MetricPower) {
			acc.nPower++
			acc.sumPowerWatts += s.PowerWatts
			acc.a.MaxPowerWatts = max(acc.a.MaxPowerWatts, s.PowerWatts)
		}
	}
	out := make([]Aggregate, 0, len(accs))
	for _, acc := range accs {
		a := acc.a
		if acc.nMem > 0 {
			a.AvgUsedBytes = acc.sumUsed / int64(acc.nMem)
		}
		if acc.nUtil > 0 {
			a.AvgGPUPercent = acc.sumUtil / float64(acc.nUtil)
		}
		if acc.nTemp > 0 {
			a.AvgTemperatureC = acc.sumTemp / float64(acc.nTemp)
		}
		if acc.nPower > 0 {
			a.AvgPowerWatts = acc.sumPowerWatts / float64(acc.nPower)
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Index != out[j].Index {
			return out[i].Index < out[j].Index
		}
		if out[i].UUID != out[j].UUID {
			return out[i].UUID < out[j].UUID
		}
		return out[i].Start.Before(out[j].Start)
	})
	return out
}
