package workflow

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"dubstudio/audio"
	"dubstudio/studio"
	"dubstudio/tts"
)

// DefaultFetchCooldown is WorkerConfig.FetchCooldown's default.
const DefaultFetchCooldown = 10 * time.Millisecond

// WorkerConfig tunes a worker process.
type WorkerConfig struct {
	// Name identifies the worker in the registry and as River's client ID.
	Name    string
	DataDir string
	// OOMRetries is how many times a line is retried after running out of GPU memory.
	OOMRetries int
	// MaxAttempts bounds retries of transient failures.
	MaxAttempts int
	// JobTimeout bounds one job; RescueAfter is when River gives a job whose worker
	// vanished (killed, host lost) to another worker. RescueAfter must exceed JobTimeout.
	JobTimeout  time.Duration
	RescueAfter time.Duration
	// FetchPollInterval is how often River polls for jobs besides its notifications.
	FetchPollInterval time.Duration
	// FetchCooldown is the least time between two fetches of a queue (default 10 ms).
	// It bounds a queue's throughput to about its workers per cooldown, and delays a
	// job inserted right after a fetch by up to that long.
	FetchCooldown time.Duration
	// FitWorkers is how many fits run at once, a synthesis fitting its own take or a
	// fit job (default: DefaultFitWorkers).
	FitWorkers int
	// SynthesisTimeoutBase + SynthesisTimeoutPerSecond × the line's seconds of audio
	// is how long one synthesis may take before the engine is taken for hung: the
	// attempt fails, the slot is reported hung (its owner kills the host) and the line
	// is retried. Defaults 60 s and 6 s.
	SynthesisTimeoutBase, SynthesisTimeoutPerSecond time.Duration
	// RetryBase and RetryMax bound the exponential backoff between attempts of a
	// failed job (defaults 2 s and 2 min).
	RetryBase, RetryMax time.Duration
	// Heartbeat is how often the worker refreshes its registry entry; a worker silent
	// for DeadAfter is taken for dead and its running jobs are handed to others.
	Heartbeat time.Duration
	DeadAfter time.Duration
}

// DefaultFitWorkers is WorkerConfig.FitWorkers' default: four times the CPUs. A fit
// of a fast engine's take computes for about a millisecond and waits longer than that
// on the database and the take's fsync; at twice the CPUs the fits, not the CPUs,
// bounded a 2-CPU worker's lines per second. Fits that stretch with Rubber Band
// compute for longer, and then share the CPUs between more of them at no loss.
func DefaultFitWorkers() int { return 4 * runtime.NumCPU() }

func (c *WorkerConfig) defaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.JobTimeout == 0 {
		c.JobTimeout = 10 * time.Minute
	}
	if c.RescueAfter == 0 {
		c.RescueAfter = c.JobTimeout + 5*time.Minute
	}
	if c.FetchPollInterval == 0 {
		c.FetchPollInterval = time.Second
	}
	if c.FetchCooldown == 0 {
		c.FetchCooldown = DefaultFetchCooldown
	}
	c.FetchCooldown = min(c.FetchCooldown, c.FetchPollInterval)
	if c.FitWorkers == 0 {
		c.FitWorkers = DefaultFitWorkers()
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 5 * time.Second
	}
	if c.SynthesisTimeoutBase == 0 {
		c.SynthesisTimeoutBase = time.Minute
	}
	if c.SynthesisTimeoutPerSecond == 0 {
		c.SynthesisTimeoutPerSecond = 6 * time.Second
	}
	if c.RetryBase == 0 {
		c.RetryBase = 2 * time.Second
	}
	if c.RetryMax == 0 {
		c.RetryMax = 2 * time.Minute
	}
	if c.DeadAfter == 0 {
		c.DeadAfter = 6 * c.Heartbeat
	}
}

// Worker works render jobs with its slots.
type Worker struct {
	cfg      WorkerConfig
	pipeline *Pipeline
	store    *studio.Store
	slots    Permits
	blobs    studio.BlobStore
	logger   *slog.Logger
	client   *river.Client[pgx.Tx]
	stopHB   context.CancelFunc
	hbDone   chan struct{}
	// conditioned caches the speaker conditionings found ("ref/model version" ->
	// cache path).
	conditioned sync.Map
	// fitSlots holds a token for each fit running in this process (FitWorkers at
	// most), whether a synthesis fits its own take or a fit job does.
	fitSlots chan struct{}
	// fitClaims counts the syntheses that fit their own take, fitting or waiting for
	// a fit slot (fitHere).
	fitClaims atomic.Int32
}

// NewWorker builds a worker over the store's pool.
func NewWorker(p *Pipeline, slots Permits, cfg WorkerConfig, logger *slog.Logger) (*Worker, error) {
	cfg.defaults()
	store := p.store
	w := &Worker{cfg: cfg, pipeline: p, store: store, slots: slots, logger: logger,
		blobs:    studio.BlobStore{Dir: filepath.Join(cfg.DataDir, "blobs")},
		fitSlots: make(chan struct{}, cfg.FitWorkers)}
	workers := river.NewWorkers()
	river.AddWorker(workers, &synthesizeWorker{w: w})
	river.AddWorker(workers, &fitWorker{w: w})
	river.AddWorker(workers, &prepareWorker{w: w})
	river.AddWorker(workers, &exportWorker{w: w})
	client, err := river.NewClient(riverpgxv5.New(store.Pool()), &river.Config{
		ID: cfg.Name,
		Queues: map[string]river.QueueConfig{
			// One more than the slots, so that a line is always ready when a slot
			// frees, and one more for each fit slot: a synthesis that fits its own
			// take holds its River worker, not its engine slot, meanwhile.
			QueueSynthesis: {MaxWorkers: slots.Capacity() + 1 + cfg.FitWorkers},
			QueueFit:       {MaxWorkers: cfg.FitWorkers},
			QueuePrepare:   {MaxWorkers: 1},
			QueueExport:    {MaxWorkers: 1},
		},
		Workers:              workers,
		JobTimeout:           cfg.JobTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		MaxAttempts:          cfg.MaxAttempts,
		RetryPolicy:          backoff{Base: cfg.RetryBase, Max: cfg.RetryMax},
		FetchPollInterval:    cfg.FetchPollInterval,
		FetchCooldown:        cfg.FetchCooldown,
		Logger:               logger,
	})
	if err != nil {
		return nil, fmt.Errorf("error creating River client: %w", err)
	}
	w.client = client
	return w, nil
}

// Client is the worker's River client (for tests and the River UI).
func (w *Worker) Client() *river.Client[pgx.Tx] { return w.client }

// Start registers the worker and starts working jobs.
func (w *Worker) Start(ctx context.Context) error {
	if err := w.ensureDirs(); err != nil {
		return err
	}
	if err := w.register(ctx); err != nil {
		return err
	}
	hbCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.stopHB, w.hbDone = cancel, make(chan struct{})
	go w.heartbeat(hbCtx)
	return w.client.Start(ctx)
}

// Stop stops fetching, lets running jobs finish until ctx ends, then cancels them
// (River retries them later) and leaves the registry.
func (w *Worker) Stop(ctx context.Context) error {
	err := w.client.Stop(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		hard, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = w.client.StopAndCancel(hard)
	}
	if w.stopHB != nil {
		w.stopHB()
		<-w.hbDone
	}
	if uerr := w.store.UnregisterWorker(context.WithoutCancel(ctx), w.cfg.Name); err == nil {
		err = uerr
	}
	return err
}

func (w *Worker) ensureDirs() error {
	return os.MkdirAll(filepath.Join(w.cfg.DataDir, "tmp"), 0o700)
}

func (w *Worker) register(ctx context.Context) error {
	host, _ := os.Hostname()
	return w.store.RegisterWorker(ctx, studio.WorkerInfo{Name: w.cfg.Name, Host: host, PID: os.Getpid(),
		Engines: w.slots.Engines(), Slots: w.slots.Capacity(), GPUs: json.RawMessage("[]")})
}

func (w *Worker) heartbeat(ctx context.Context) {
	defer close(w.hbDone)
	t := time.NewTicker(w.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := w.store.WorkerHeartbeat(ctx, w.cfg.Name); err != nil && ctx.Err() == nil {
				w.logger.WarnContext(ctx, "worker heartbeat failed", "err", err)
				// The row may be gone (a cleanup, a restored database): register again.
				_ = w.register(ctx)
			}
			if n, err := w.store.RescueDeadWorkers(ctx, w.cfg.DeadAfter); err != nil && ctx.Err() == nil {
				w.logger.WarnContext(ctx, "rescuing dead workers' jobs failed", "err", err)
			} else if n > 0 {
				w.logger.InfoContext(ctx, "handed back jobs of a dead worker", "jobs", n)
			}
		}
	}
}

// rawPath returns a new path in the worker's temporary directory, for the engine's
// output (which the engine writes through its own temporary file and a rename). The
// name is random; the file is not created, which would cost a file creation per
// line for nothing.
func (w *Worker) rawPath() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(w.cfg.DataDir, "tmp", "raw-"+hex.EncodeToString(b[:])+".wav")
}

// needsReference reports whether an engine clones a voice from a reference recording.
// The CPU preview engine and the simulator speak without one.
func needsReference(engine string) bool { return engine != "espeak" && engine != "simulator" }

// failure is a render failure to show the user: a catalog key and its arguments.
type failure struct {
	key  string
	args []any
}

func (f *failure) Error() string { return "render failed: " + f.key }

func userKey(key string, args ...any) error { return &failure{key: key, args: args} }

func errorText(err error) (msg, detail string) {
	var f *failure
	if errors.As(err, &f) {
		b, _ := json.Marshal(map[string]any{"key": f.key, "args": f.args})
		return string(b), ""
	}
	var te *tts.Error
	if errors.As(err, &te) {
		b, _ := json.Marshal(map[string]any{"key": te.Code.MessageKey()})
		return string(b), strings.TrimSpace(te.Error() + "\n" + te.Traceback)
	}
	b, _ := json.Marshal(map[string]any{"key": "render.internal", "args": []any{err.Error()}})
	return string(b), err.Error()
}

// fail records a failed attempt and returns what River should do with the job.
func (w *Worker) fail(ctx context.Context, job *rivertype.JobRow, lineID int64, seq int, err error) error {
	if diskFull(err) {
		// Nothing will succeed until someone frees space: say so, and stop retrying.
		err = userKey("audio.no_space")
	}
	permanent := false
	var f *failure
	switch {
	case errors.As(err, &f), errors.Is(err, tts.ErrInvalidInput):
		permanent = true
	case errors.Is(err, tts.ErrOutOfMemory):
		// Out of memory is retried OOMRetries times (the executor admits less meanwhile).
		permanent = job.Attempt > w.cfg.OOMRetries
	}
	final := permanent || job.Attempt >= job.MaxAttempts
	msg, detail := errorText(err)
	if _, serr := w.store.RenderFailure(ctx, lineID, seq, job.Attempt, msg, detail, final); serr != nil {
		return errors.Join(err, serr)
	}
	w.logger.WarnContext(ctx, "render attempt failed", "line", lineID, "attempt", job.Attempt, "final", final, "err", err)
	if final {
		return river.JobCancel(err)
	}
	return err
}

// diskFull reports whether err says the disk is full, from this process or in the
// text of an engine process's error (a model host's OSError).
func diskFull(err error) bool {
	if errors.Is(err, audio.ErrNoSpace) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Disk quota exceeded")
}

type synthesizeWorker struct {
	river.WorkerDefaults[SynthesizeArgs]
	w *Worker
}

func (s *synthesizeWorker) Timeout(*river.Job[SynthesizeArgs]) time.Duration {
	return s.w.cfg.JobTimeout
}

func (s *synthesizeWorker) Work(ctx context.Context, job *river.Job[SynthesizeArgs]) error {
	w := s.w
	a := job.Args
	in, err := w.store.RenderInput(ctx, a.LineID)
	if errors.Is(err, studio.ErrNotFound) {
		return nil // the line was deleted
	}
	if err != nil {
		return err
	}
	if in.Line.RenderSeq != a.RenderSeq || in.Line.State == studio.StateCancelled {
		return nil // stale: edited, re-queued or cancelled since
	}
	req, err := w.request(ctx, in)
	if err != nil {
		return w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, err)
	}
	engines := w.slots.Engines()
	if in.Character != nil && in.Character.RefAudioSHA256 != nil {
		ready, cond, err := w.conditioning(ctx, *in.Character.RefAudioSHA256)
		if err != nil {
			return err
		}
		if !ready {
			// Wait without holding a slot: the prepare job runs first.
			return river.JobSnooze(conditioningWait)
		}
		req.Speaker.ConditioningPath = cond
		p, err := w.blobs.Path(*in.Character.RefAudioSHA256)
		if err != nil {
			return err
		}
		req.Speaker.ReferenceAudioPath = p
	} else if needsReference(engines[0]) {
		name := ""
		if in.Character != nil {
			name = in.Character.Name
		}
		return w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, userKey("render.no_reference", name))
	}

	sreq := PermitRequest{LineID: a.LineID, AudioSeconds: req.TargetSeconds, TextRunes: len([]rune(req.Text))}
	var slot Permit
	if t, ok := w.slots.(permitTrier); ok {
		slot = t.TryAcquire(sreq)
	}
	if slot == nil {
		// Only a line that has to wait for a slot shows it: one state write and one
		// notification less for the others.
		if ok, err := w.store.SetRenderState(ctx, a.LineID, a.RenderSeq, studio.StateWaitingGPU, job.Attempt); err != nil || !ok {
			return err
		}
		if slot, err = w.slots.Acquire(ctx, sreq); err != nil {
			return err
		}
	}
	released := false
	release := func(o Outcome) {
		if !released {
			released = true
			slot.Done(o)
		}
	}
	defer release(Outcome{Failed: true})
	if ok, err := w.store.SetRenderState(ctx, a.LineID, a.RenderSeq, studio.StateSynthesizing, job.Attempt); err != nil || !ok {
		return err
	}
	tmpDir := filepath.Join(w.cfg.DataDir, "tmp")
	if !hasSpace(tmpDir, takeBytes(max(req.TargetSeconds, tts.PredictNaturalSeconds(req.Text, req.Language)))) {
		return w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, userKey("audio.no_space"))
	}
	raw := w.rawPath()
	stored := false
	defer func() {
		if !stored {
			os.Remove(raw)
		}
	}()
	req.OutputPath = raw
	req.Seed = job.ID
	start := time.Now()
	limit := w.synthesisDeadline(req)
	sctx, cancel := context.WithTimeout(ctx, limit)
	res, err := slot.Engine().Synthesize(sctx, req)
	hung := err != nil && errors.Is(sctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	synthMs := int(time.Since(start).Milliseconds())
	if hung {
		// The engine is stuck (a hung model host): give up on it; the retry runs on a
		// slot whose owner killed or replaced it.
		err = &tts.Error{Code: tts.CodeUnavailable, Message: fmt.Sprintf("no answer within the synthesis deadline of %s", limit), Err: err}
	}
	release(Outcome{PeakBytes: res.PeakReservedBytes, OOM: errors.Is(err, tts.ErrOutOfMemory), Failed: err != nil, Hung: hung})
	if !hasSpace(tmpDir, minFreeBytes) {
		// The disk filled up meanwhile: the output may be cut short, whatever the
		// engine says.
		err = userKey("audio.no_space")
	}
	if err != nil {
		return w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, err)
	}
	// The output is read once, into a pooled buffer: described, hashed, moved into
	// the blob store (its row is recorded with the state change below) and fitted
	// from there when this worker fits it.
	output, releaseOutput, err := audio.ReadFilePooled(raw)
	if err != nil {
		return w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, fmt.Errorf("engine output: %w", err))
	}
	defer releaseOutput()
	info, err := outputInfo(ctx, raw, output)
	if err != nil {
		return w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, fmt.Errorf("engine output: %w", err))
	}
	sum := sha256.Sum256(output)
	size := int64(len(output))
	blob := studio.Blob{SHA256: hex.EncodeToString(sum[:]), SizeBytes: size, Format: info.Format,
		DurationMs: int(info.Duration.Milliseconds()), SampleRate: info.SampleRate, Channels: info.Channels}
	if err := w.blobs.Put(raw, blob.SHA256); err != nil {
		return err
	}
	stored = true
	fit := FitArgs{LineID: a.LineID, RenderSeq: a.RenderSeq, ProjectID: a.ProjectID, Revision: in.Line.Revision,
		RawSHA256: blob.SHA256, SpokenText: req.Text, Engine: res.Engine, ModelVersion: res.ModelVersion,
		Device: slot.Device(), Worker: w.cfg.Name, Seed: req.Seed, PeakBytes: res.PeakReservedBytes,
		SynthMs: synthMs, AudioSeconds: info.Duration.Seconds()}
	// The synthesis fits its take itself (its engine slot is already free): no fit
	// job to insert, fetch and complete, and the output is not read again. Only where
	// this worker's fits back up is the take handed to a fit job, inserted with the
	// state change, which any worker takes on.
	inline := w.fitHere()
	if inline {
		defer w.fitClaims.Add(-1)
	}
	var fitIn *studio.FitInput
	err = w.store.TxPgx(ctx, func(tx pgx.Tx) error {
		var err error
		fitIn, err = studio.StartFitTx(ctx, tx, a.LineID, a.RenderSeq, !inline, blob)
		if errors.Is(err, studio.ErrNotFound) {
			return nil // stale: the blob's row is kept all the same, as its file is
		}
		if err != nil || inline {
			return err
		}
		_, err = w.pipeline.pgxInserter.InsertTx(ctx, tx, fit, nil)
		return err
	})
	if err != nil || fitIn == nil || !inline {
		return err
	}
	// The line shows fitting while it waits for a fit slot, as it does while a fit
	// job waits in the queue.
	if err := w.fitSlot(ctx); err != nil {
		return err
	}
	defer w.releaseFitSlot()
	return w.fitTake(ctx, job.JobRow, fit, fitIn, output)
}

// fitHere claims a place for a synthesis to fit its own take: one of as many
// places as twice the fit slots, for the syntheses fitting and as many waiting for a
// fit slot. It returns false where every place is taken: the worker's fits are backed
// up (its CPUs cannot keep up with its engines), and a fit job lets another worker
// take the take on. A claim ends with w.fitClaims.Add(-1).
func (w *Worker) fitHere() bool {
	if int(w.fitClaims.Add(1)) > 2*cap(w.fitSlots) {
		w.fitClaims.Add(-1)
		return false
	}
	return true
}

// fitSlot waits for a fit slot.
func (w *Worker) fitSlot(ctx context.Context) error {
	select {
	case w.fitSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Worker) releaseFitSlot() { <-w.fitSlots }

// outputInfo describes an engine's output, the file at path whose bytes are b. The
// 16-bit PCM WAV that engines write is checked whole here (its header, and data as
// long as the header says), which proves it complete and decodable without starting
// ffprobe and ffmpeg (most of a line's cost with a fast engine); anything else is
// probed.
func outputInfo(ctx context.Context, path string, b []byte) (audio.Info, error) {
	info, err := audio.DescribeWAV(b)
	if err != nil || info.Duration == 0 {
		return audio.Probe(ctx, path)
	}
	return info, nil
}

// synthesisDeadline bounds one synthesis: a fixed allowance plus an allowance per
// second of audio expected (the slot, or the text's natural length when longer).
func (w *Worker) synthesisDeadline(req tts.Request) time.Duration {
	secs := max(req.TargetSeconds, tts.PredictNaturalSeconds(req.Text, req.Language))
	return w.cfg.SynthesisTimeoutBase + time.Duration(secs*float64(w.cfg.SynthesisTimeoutPerSecond))
}

// request builds the engine request for a line: glossary applied, emotion and voice
// from the line or its character, the slot as target length.
func (w *Worker) request(ctx context.Context, in *studio.RenderInput) (tts.Request, error) {
	gloss := make([]tts.GlossaryEntry, len(in.Glossary))
	for i, g := range in.Glossary {
		gloss[i] = tts.GlossaryEntry{Term: g.Term, Spoken: g.Spoken}
	}
	text := strings.TrimSpace(tts.ApplyGlossary(in.Line.Text, gloss))
	if text == "" {
		return tts.Request{}, userKey("render.empty_text")
	}
	if in.Line.DurationLock && in.Line.DurationMs() <= 0 {
		return tts.Request{}, userKey("render.no_slot_length")
	}
	req := tts.Request{Text: text, Language: tts.GuessLanguage(text)}
	if in.Line.DurationMs() > 0 {
		req.TargetSeconds = float64(in.Line.DurationMs()) / 1000
	} else {
		req.TargetSeconds = tts.PredictNaturalSeconds(text, req.Language)
	}
	if in.Line.DurationLock && in.Line.DurationMs() > 0 {
		// Engines with duration control (IndexTTS-2.5, espeak) aim at the slot; the
		// duration lock then has less to stretch.
		req.DurationFactor = tts.DurationFactorFor(text, req.Language, req.TargetSeconds)
	}
	emo := studio.Emotion{Mode: studio.EmotionSpeaker}
	if in.Character != nil {
		emo = in.Character.Emotion
		req.Speaker.Voice = in.Character.PreviewVoice
	}
	if in.Line.Emotion != nil {
		emo = *in.Line.Emotion
	}
	e, err := w.emotion(ctx, in.Project.ID, emo)
	if err != nil {
		return tts.Request{}, err
	}
	req.Emotion = e
	return req, nil
}

func (w *Worker) emotion(ctx context.Context, projectID int64, e studio.Emotion) (tts.Emotion, error) {
	out := tts.Emotion{Mode: tts.EmotionMode(e.Mode), Weight: e.Weight, Text: e.Text}
	switch e.Mode {
	case studio.EmotionVector:
		copy(out.Vector[:], e.Vector)
	case studio.EmotionAudio:
		if e.FromSource() {
			p, err := w.sourceSegment(ctx, projectID, e.SourceStartMs, e.SourceEndMs)
			if err != nil {
				return out, err
			}
			out.AudioPath = p
			return out, nil
		}
		if e.AudioSHA256 == "" {
			return out, userKey("emotion.audio_missing")
		}
		p, err := w.blobs.Path(e.AudioSHA256)
		if err != nil {
			return out, err
		}
		out.AudioPath = p
	case "":
		out.Mode = tts.EmotionSpeaker
	}
	return out, nil
}

// sourceSegment returns the path of the project's source audio between startMs and
// endMs (the original actor's delivery, as an emotion reference), cutting it once and
// keeping it as a blob shared with the review page.
func (w *Worker) sourceSegment(ctx context.Context, projectID int64, startMs, endMs int) (string, error) {
	src, err := w.store.ProjectSource(ctx, projectID)
	if errors.Is(err, studio.ErrNotFound) {
		return "", userKey("source.missing")
	}
	if err != nil {
		return "", err
	}
	in, err := w.blobs.Path(src.AudioSHA256)
	if err != nil {
		return "", err
	}
	if startMs >= src.DurationMs {
		return "", userKey("source.after_end")
	}
	blob, err := w.store.DerivedAudio(ctx, w.blobs, studio.SourceSegmentKey(src.AudioSHA256, startMs, endMs),
		func(ctx context.Context, out string) (studio.Blob, error) {
			err := audio.Segment(ctx, in, time.Duration(startMs)*time.Millisecond, time.Duration(endMs)*time.Millisecond, out)
			return studio.Blob{Format: audio.FormatWAV, DurationMs: endMs - startMs, SampleRate: audio.DefaultSampleRate, Channels: src.Channels}, err
		})
	if err != nil {
		return "", fmt.Errorf("error cutting the source segment %d-%d ms: %w", startMs, endMs, err)
	}
	return w.blobs.Path(blob.SHA256)
}

// conditioning reports whether the speaker conditioning of a reference exists for the
// engine's model, queueing its preparation (once) when it does not.
func (w *Worker) conditioning(ctx context.Context, refSHA string) (bool, string, error) {
	info, err := w.slots.Model(ctx)
	if err != nil {
		return false, "", err
	}
	key := refSHA + "/" + info.Version
	if path, ok := w.conditioned.Load(key); ok {
		return true, path.(string), nil
	}
	path, ok, err := w.store.SpeakerConditioning(ctx, refSHA, info.Version)
	if ok {
		// Conditioning is made once per reference and model and never removed: no
		// need to ask the database again for every line.
		w.conditioned.Store(key, path)
	}
	if err != nil || ok {
		return ok, path, err
	}
	_, err = w.pipeline.inserter.Insert(ctx, PrepareSpeakerArgs{RefSHA256: refSHA, ModelVersion: info.Version}, nil)
	return false, "", err
}

type prepareWorker struct {
	river.WorkerDefaults[PrepareSpeakerArgs]
	w *Worker
}

func (p *prepareWorker) Work(ctx context.Context, job *river.Job[PrepareSpeakerArgs]) error {
	w := p.w
	if _, ok, err := w.store.SpeakerConditioning(ctx, job.Args.RefSHA256, job.Args.ModelVersion); err != nil || ok {
		return err
	}
	ref, err := w.blobs.Path(job.Args.RefSHA256)
	if err != nil {
		return river.JobCancel(err)
	}
	slot, err := w.slots.Acquire(ctx, PermitRequest{AudioSeconds: 15})
	if err != nil {
		return err
	}
	res, err := slot.Engine().PrepareSpeaker(ctx, tts.PrepareRequest{ReferenceAudioPath: ref, ReferenceSHA256: job.Args.RefSHA256,
		CacheDir: filepath.Join(w.cfg.DataDir, "conditioning")})
	slot.Done(Outcome{OOM: errors.Is(err, tts.ErrOutOfMemory), Failed: err != nil})
	if err != nil {
		if errors.Is(err, tts.ErrInvalidInput) {
			return river.JobCancel(err)
		}
		return err
	}
	return w.store.SaveSpeakerConditioning(ctx, job.Args.RefSHA256, job.Args.ModelVersion, res.CachePath, w.cfg.Name)
}

type fitWorker struct {
	river.WorkerDefaults[FitArgs]
	w *Worker
}

func (f *fitWorker) Work(ctx context.Context, job *river.Job[FitArgs]) error {
	if err := f.w.fitSlot(ctx); err != nil {
		return err
	}
	defer f.w.releaseFitSlot()
	a := job.Args
	in, err := f.w.store.FitInput(ctx, a.LineID)
	if errors.Is(err, studio.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if in.RenderSeq != a.RenderSeq || in.State == studio.StateCancelled {
		return nil
	}
	return f.w.fitTake(ctx, job.JobRow, a, in, nil)
}

// fitTake fits a synthesized take to its line's slot as in says and records it, for
// the job (a fit job, or the synthesis that fits its own take) whose attempt it is.
// raw is the engine's output when the caller has it in memory; otherwise it is read
// from the blob store.
func (w *Worker) fitTake(ctx context.Context, job *rivertype.JobRow, a FitArgs, in *studio.FitInput, raw []byte) error {
	rawPath, err := w.blobs.Path(a.RawSHA256)
	if err != nil {
		// A malformed job: the line fails with the error rather than stay fitting.
		return w.fail(ctx, job, a.LineID, a.RenderSeq, userKey("render.internal", err.Error()))
	}
	// The take goes straight into the blob store, written once in its directory
	// (through a temporary file there and a rename): a shared scratch directory cost
	// a second rename across directories, and its lock was contended by every fit
	// and synthesis at once.
	params := audio.FitParams{InputPath: rawPath, Input: raw, OutputFor: w.blobs.Dest, StretchMin: in.StretchMin, StretchMax: in.StretchMax,
		LoudnessLUFS: in.LoudnessLUFS, MaxSpeedStep: in.MaxSpeedStep, PrevRatio: in.PrevRatio, GapMs: in.GapAfterMs,
		GapBorrowMs: in.GapBorrowMs}
	if in.GapBorrowMs == 0 {
		params.GapBorrowMs = -1 // audio treats 0 as "default"; the project asked for none
	}
	if in.MaxSpeedStep == 0 {
		params.MaxSpeedStep = -1
	}
	if in.DurationLock && in.SlotMs > 0 {
		params.SlotMs = in.SlotMs
	} else {
		// Not locked: keep the natural length (trim and loudness only).
		params.SlotMs = int(a.AudioSeconds*1000 + 0.5)
		params.StretchMin, params.StretchMax = 1, 1
		params.GapBorrowMs = -1
	}
	start := time.Now()
	res, err := audio.Fit(ctx, params)
	if err != nil {
		if errors.Is(err, audio.ErrNoSpace) {
			return w.fail(ctx, job, a.LineID, a.RenderSeq, userKey("audio.no_space"))
		}
		return w.fail(ctx, job, a.LineID, a.RenderSeq, err)
	}
	fitMs := int(time.Since(start).Milliseconds())
	// Fit hashed the take as it wrote it; its row is recorded with the take.
	blob := studio.Blob{SHA256: res.SHA256, SizeBytes: res.Bytes, Format: audio.FormatWAV,
		DurationMs: int(res.Samples * 1000 / int64(res.SampleRate)), SampleRate: res.SampleRate, Channels: 1}
	raw256 := a.RawSHA256
	take := &studio.Take{LineID: a.LineID, ProjectID: a.ProjectID, Revision: a.Revision, RenderSeq: a.RenderSeq,
		Engine: a.Engine, ModelVersion: a.ModelVersion, GPU: a.Device, Worker: a.Worker, Seed: a.Seed,
		SpokenText: a.SpokenText, PeakVRAMBytes: a.PeakBytes, SynthMs: a.SynthMs, FitMs: fitMs,
		AudioMs: int(a.AudioSeconds * 1000), DurationMs: blob.DurationMs, StretchRatio: res.Ratio, NeededRatio: res.NeededRatio,
		BorrowedMs: res.BorrowedMs, LoudnessLUFS: res.LoudnessLUFS, NeedsReview: res.NeedsReview,
		AudioSHA256: blob.SHA256, RawSHA256: &raw256}
	if a.AudioSeconds > 0 {
		take.RTF = float64(a.SynthMs) / 1000 / a.AudioSeconds
	}
	if res.NeedsReview {
		take.Hint = &studio.TakeHint{Key: res.Hint.Key, Args: res.Hint.Args}
	}
	_, err = w.store.FinishRender(ctx, take, blob)
	return err
}
