package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"dubstudio/gpu"
	"dubstudio/studio"
)

// Live describes the GPUs for the admin page and /metrics: the recent samples, the
// executor's budget and seats, the pools and the settings in force.
func (s *GPUs) Live(recent time.Duration) gpu.LiveState {
	m := s.exec.Metrics()
	snaps := s.exec.Snapshot()
	st := gpu.LiveState{Engine: s.cfg.Engine, Simulated: s.cfg.Simulated, Waiting: m.Waiting, NeverFits: m.NeverFits,
		At: time.Now()}
	devs := map[string]gpu.Device{}
	for _, d := range s.cfg.Monitor.Devices() {
		devs[d.UUID] = d
	}
	batches := s.readBatches()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.order {
		e := s.gpus[u]
		g := gpu.LiveGPU{Device: e.dev, ProfileID: e.profileID, CalibrationID: e.calibrationID,
			ProfileProblem: e.problem, Calibrating: e.calibrating, Pool: e.pool.Status()}
		if d, ok := devs[u]; ok {
			g.Lost = d.Lost
		}
		g.Batch = batches[u]
		g.BatchRecent = e.recordBatch(g.Batch, st.At, recent)
		for _, sn := range snaps {
			if sn.UUID == u {
				g.Snapshot = sn
			}
		}
		for _, gm := range m.GPUs {
			if gm.UUID == u {
				g.Counters = gm.GPUCounters
			}
		}
		hist := s.cfg.Monitor.History(u, st.At.Add(-recent))
		for _, smp := range hist {
			g.Recent = append(g.Recent, gpu.PointOf(smp))
		}
		if n := len(hist); n > 0 {
			latest := g.Recent[n-1]
			g.Latest = &latest
			g.Processes = hist[n-1].Processes
		}
		st.GPUs = append(st.GPUs, g)
	}
	return st
}

// The live state (gpu.LiveState) is JSON in gpu_live, replaced every PublishEvery
// by its worker; this file is its one encoder and one decoder. It is ephemeral: a
// worker of another version republishes within seconds, so its shape may change
// without migration.

func encodeState(st gpu.LiveState) (json.RawMessage, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding the GPU state: %w", err)
	}
	return data, nil
}

// DecodeState reads a worker's published state.
func DecodeState(raw json.RawMessage) (gpu.LiveState, error) {
	var st gpu.LiveState
	if err := json.Unmarshal(raw, &st); err != nil {
		return gpu.LiveState{}, fmt.Errorf("decoding a GPU state: %w", err)
	}
	return st, nil
}

// staleAfter is how old a worker's published state may be before the page says so.
const staleAfter = 10 * time.Second

// Board is every live worker's GPUs, as they published them, and the live workers
// without GPUs.
type Board struct {
	// Cards are ordered by host, then GPU index.
	Cards      []Card
	CPUWorkers []CPUWorker
	// Unreadable are the states that could not be decoded, left out of Cards.
	Unreadable []error
}

// Card is one GPU of one live worker.
type Card struct {
	Worker, Host string
	Engine       string
	Simulated    bool
	// StaleSeconds: the worker has not published for that long (0: it has lately).
	StaleSeconds int
	GPU          gpu.LiveGPU
	// AssignedID is the stored profile assigned to the GPU (0: the default).
	AssignedID int64
	// Running are the lines the GPU's hosts render now, by id (gpu.SeatSnapshot.LineID).
	Running map[int64]studio.LineSummary
}

// CPUWorker is a live worker that publishes no GPU.
type CPUWorker struct {
	Name, Host string
	Engines    []string
	Reason     string
}

// Card returns the first card of the GPU with uuid.
func (b Board) Card(uuid string) (Card, bool) {
	for _, c := range b.Cards {
		if c.GPU.UUID == uuid {
			return c, true
		}
	}
	return Card{}, false
}

// ReadBoard reads the GPUs of the workers that are alive (a state that cannot be
// decoded is left out) and names the lines they run.
func ReadBoard(ctx context.Context, store *studio.Store) (Board, error) {
	states, err := store.GPULiveStates(ctx)
	if err != nil {
		return Board{}, err
	}
	workers, err := store.Workers(ctx)
	if err != nil {
		return Board{}, err
	}
	as, err := store.GPUAssignments(ctx)
	if err != nil {
		return Board{}, err
	}
	assigned := map[string]int64{}
	for _, a := range as {
		assigned[a.GPUUUID] = a.ProfileID
	}
	var b Board
	published := map[string]bool{}
	for _, l := range states {
		if !l.Alive() {
			continue
		}
		st, err := DecodeState(l.State)
		if err != nil {
			b.Unreadable = append(b.Unreadable, fmt.Errorf("worker %s: %w", l.Worker, err))
			continue
		}
		published[l.Worker] = len(st.GPUs) > 0
		stale := 0
		if l.Age > staleAfter {
			stale = int(l.Age.Seconds())
		}
		for _, g := range st.GPUs {
			b.Cards = append(b.Cards, Card{Worker: l.Worker, Host: l.Host, Engine: st.Engine, Simulated: st.Simulated,
				StaleSeconds: stale, GPU: g, AssignedID: assigned[g.UUID]})
		}
	}
	for _, w := range workers {
		if w.Alive() && !published[w.Name] {
			b.CPUWorkers = append(b.CPUWorkers, CPUWorker{Name: w.Name, Host: w.Host, Engines: w.Engines})
		}
	}
	slices.SortStableFunc(b.Cards, func(x, y Card) int {
		return cmp.Or(cmp.Compare(x.Host, y.Host), cmp.Compare(x.GPU.Index, y.GPU.Index))
	})
	if err := nameRunning(ctx, store, b.Cards); err != nil {
		return Board{}, err
	}
	return b, nil
}

// nameRunning looks up the lines the cards' hosts run.
func nameRunning(ctx context.Context, store *studio.Store, cards []Card) error {
	var ids []int64
	for _, cd := range cards {
		for _, h := range cd.GPU.Snapshot.Hosts {
			for _, sl := range h.Seats {
				if sl.LineID != 0 {
					ids = append(ids, sl.LineID)
				}
			}
		}
	}
	lines, err := store.LineSummaries(ctx, ids)
	if err != nil || len(lines) == 0 {
		return err
	}
	for i := range cards {
		cards[i].Running = map[int64]studio.LineSummary{}
		for _, h := range cards[i].GPU.Snapshot.Hosts {
			for _, sl := range h.Seats {
				if l, ok := lines[sl.LineID]; ok {
					cards[i].Running[sl.LineID] = l
				}
			}
		}
	}
	return nil
}
