package workflow

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"dubstudio/audio"
	"dubstudio/blobhash"
	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/tts"
)

// synthesizeWorker works synthesize_line jobs: one render of a line, from its text
// to the engine's output in the blob store and, most often, to its take (the
// synthesis fits the take itself; where its worker's fits back up, a fit job does).
type synthesizeWorker struct {
	river.WorkerDefaults[SynthesizeArgs]
	w *Worker
}

func (s *synthesizeWorker) Timeout(*river.Job[SynthesizeArgs]) time.Duration {
	return s.w.cfg.JobTimeout
}

// Work renders a line in steps. A step that ends the job (the render is stale, a
// failure was recorded, the line waits for its speaker) returns what Work returns:
// an error, or nil with no result. An error no step recorded is recorded on the
// line (settle).
func (s *synthesizeWorker) Work(ctx context.Context, job *river.Job[SynthesizeArgs]) error {
	return s.w.settle(ctx, job.JobRow, job.Args.LineID, job.Args.RenderSeq, func() error { return s.work(ctx, job) })
}

func (s *synthesizeWorker) work(ctx context.Context, job *river.Job[SynthesizeArgs]) error {
	w := s.w
	in, err := w.loadRender(ctx, job)
	if in == nil || err != nil {
		return err
	}
	req, err := w.request(ctx, in)
	if err != nil {
		return w.fail(ctx, job.JobRow, job.Args.LineID, job.Args.RenderSeq, err)
	}
	if err := w.ensureSpeaker(ctx, job, in, &req); err != nil {
		return err
	}
	req.First = job.Priority == PriorityFirst
	asked := time.Now()
	permit, err := w.acquirePermit(ctx, job, req)
	if permit == nil || err != nil {
		return err
	}
	waitMs := int(time.Since(asked).Milliseconds())
	out, err := w.synthesize(ctx, job, permit, req)
	if out == nil || err != nil {
		return err
	}
	out.usage.PermitWaitMs = waitMs
	if err := w.storeOutput(ctx, job, out); err != nil {
		return err
	}
	defer out.release()
	return w.handToFit(ctx, job, in, out)
}

// loadRender loads what the synthesis needs. It returns nil, and no error, where the
// job is stale (the line was deleted, or edited, re-queued or cancelled since) or
// its render finished: a retry of a job whose render recorded its take, and then
// failed to check the take's overrun, checks it (checkOverrun).
func (w *Worker) loadRender(ctx context.Context, job *river.Job[SynthesizeArgs]) (*studio.RenderInput, error) {
	a := job.Args
	in, err := w.store.RenderInput(ctx, a.LineID)
	if errors.Is(err, studio.ErrNotFound) {
		return nil, nil // the line was deleted
	}
	if err != nil {
		return nil, err
	}
	if in.Line.RenderSeq != a.RenderSeq || in.Line.State == studio.StateCancelled {
		return nil, nil // stale: edited, re-queued or cancelled since
	}
	if in.Line.State.Rendered() {
		return nil, w.checkOverrun(ctx, job.JobRow, a.ProjectID, a.LineID)
	}
	return in, nil
}

// ensureSpeaker sets the request's reference recording and speaker conditioning. Where
// the conditioning is not ready it queues its preparation and snoozes the job, which
// holds no permit while it waits; a line that needs a reference and has none fails.
func (w *Worker) ensureSpeaker(ctx context.Context, job *river.Job[SynthesizeArgs], in *studio.RenderInput, req *tts.Request) error {
	engines := w.permits.Engines()
	if in.Character != nil && in.Character.RefAudioSHA256 != nil {
		ready, cond, failed, err := w.conditioning(ctx, *in.Character.RefAudioSHA256, job.CreatedAt)
		if err != nil {
			return err
		}
		if failed != "" {
			return w.fail(ctx, job.JobRow, job.Args.LineID, job.Args.RenderSeq, userKey("render.speaker_failed", in.Character.Name, failed))
		}
		if !ready {
			// Wait without holding a permit: the prepare job runs first.
			return river.JobSnooze(conditioningWait)
		}
		req.Speaker.ConditioningPath = cond
		p, err := w.blobs.Path(*in.Character.RefAudioSHA256)
		if err != nil {
			return err
		}
		req.Speaker.ReferenceAudioPath = p
		return nil
	}
	if needsReference(engines[0]) {
		name := ""
		if in.Character != nil {
			name = in.Character.Name
		}
		return w.fail(ctx, job.JobRow, job.Args.LineID, job.Args.RenderSeq, userKey("render.no_reference", name))
	}
	return nil
}

// acquirePermit takes a permit to run the synthesis, at once if one is free. It
// returns nil, and no error, where the render turned out stale meanwhile.
func (w *Worker) acquirePermit(ctx context.Context, job *river.Job[SynthesizeArgs], req tts.Request) (Permit, error) {
	a := job.Args
	preq := PermitRequest{LineID: a.LineID, AudioSeconds: req.TargetSeconds, TextRunes: len([]rune(req.Text)), First: req.First}
	if t, ok := w.permits.(permitTrier); ok {
		if permit := t.TryAcquire(preq); permit != nil {
			return permit, nil
		}
	}
	// Only a line that has to wait for a permit shows it: one state write and one
	// notification less for the others.
	if ok, err := w.store.SetRenderState(ctx, a.LineID, a.RenderSeq, studio.StateWaitingGPU, job.Attempt); err != nil || !ok {
		return nil, err
	}
	return w.permits.Acquire(ctx, preq)
}

// engineOutput is what a synthesis produced: the engine's result, and its output,
// the file at raw until storeOutput moves it into the blob store and reads it.
type engineOutput struct {
	res tts.Result
	// spokenText and seed are the request's (the text after the glossary).
	spokenText string
	seed       int64
	synthMs    int
	device     string
	raw        string
	// usage is the synthesis's resource usage, for the take (takeUsage).
	usage studio.TakeUsage
	// Set by storeOutput: the output's blob, its bytes in a pooled buffer, and what
	// gives the buffer back.
	blob    studio.Blob
	info    audio.Info
	bytes   []byte
	release func()
}

// synthesize runs the engine on the permit and gives the permit back. It returns
// nil, and what Work returns, where the render is stale or the synthesis failed (the
// failure recorded).
func (w *Worker) synthesize(ctx context.Context, job *river.Job[SynthesizeArgs], permit Permit, req tts.Request) (*engineOutput, error) {
	a := job.Args
	released := false
	release := func(o Outcome) {
		if !released {
			released = true
			permit.Done(o)
		}
	}
	defer release(Outcome{Failed: true})
	if ok, err := w.store.SetRenderState(ctx, a.LineID, a.RenderSeq, studio.StateSynthesizing, job.Attempt); err != nil || !ok {
		return nil, err
	}
	tmpDir := filepath.Join(w.cfg.DataDir, "tmp")
	if !hasSpace(tmpDir, takeBytes(max(req.TargetSeconds, tts.PredictNaturalSeconds(req.Text, req.Language)))) {
		return nil, w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, userKey("audio.no_space"))
	}
	out := &engineOutput{raw: w.rawPath(), spokenText: req.Text, seed: job.ID, device: permit.Device()}
	req.OutputPath = out.raw
	req.Seed = out.seed
	start := time.Now()
	limit := w.synthesisDeadline(req)
	sctx, cancel := context.WithTimeout(ctx, limit)
	res, err := permit.Engine().Synthesize(sctx, req)
	hung := err != nil && errors.Is(sctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	out.res, out.synthMs = res, int(time.Since(start).Milliseconds())
	if hung {
		// The engine is stuck (a hung model host): give up on it; the retry runs on a
		// permit whose owner killed or replaced it.
		err = &tts.Error{Code: tts.CodeUnavailable, Message: fmt.Sprintf("no answer within the synthesis deadline of %s", limit), Err: err}
	}
	release(Outcome{PeakBytes: res.LineVRAMBytes(), OOM: errors.Is(err, tts.ErrOutOfMemory), Failed: err != nil, Hung: hung})
	out.usage = takeUsage(res, permit)
	if !hasSpace(tmpDir, minFreeBytes) {
		// The disk filled up meanwhile: the output may be cut short, whatever the
		// engine says.
		err = userKey("audio.no_space")
	}
	if err != nil {
		os.Remove(out.raw)
		return nil, w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, err)
	}
	return out, nil
}

// takeUsage is what a synthesis used, from the engine's result and its permit
// (given back already, so that a metered permit knows the measured share): a
// batching host's own account of the line (tts.SequenceInfo), otherwise the stage
// times a version-1 host reports. The permit wait is the caller's to add.
func takeUsage(res tts.Result, permit Permit) studio.TakeUsage {
	ms := func(secs float64) int { return int(math.Round(secs * 1000)) }
	u := studio.TakeUsage{HostQueueMs: ms(res.Stages["queue"]), GPTMs: ms(res.Stages["gpt"]),
		S2MelMs: ms(res.Stages["s2mel"]), VocoderMs: ms(res.Stages["vocoder"])}
	if sq := res.Sequence; sq != nil {
		u.KVBytes, u.ActivationBytes = sq.KVBytes, sq.ActivationBytes
		u.HostQueueMs, u.GPTMs, u.S2MelWaitMs = ms(sq.QueueSeconds), ms(sq.GPTSeconds), ms(sq.S2MelWaitSeconds)
		u.S2MelMs, u.VocoderMs = ms(sq.S2MelSeconds), ms(sq.VocoderSeconds)
		u.BatchRowsMean, u.S2MelGroup = sq.BatchRowsMean, sq.S2MelGroup
	}
	if m, ok := permit.(MeteredPermit); ok {
		pu := m.Usage()
		u.PredictedVRAMBytes, u.MeasuredVRAMBytes = pu.PredictedBytes, pu.MeasuredBytes
		idx := pu.GPUIndex
		u.GPUIndex = &idx
	}
	return u
}

// storeOutput reads the engine's output once, into a pooled buffer: described,
// hashed, moved into the blob store (its row is recorded with the state change that
// follows, StartFit) and fitted from there when this worker fits it. On success the
// caller gives the buffer back with out.release.
func (w *Worker) storeOutput(ctx context.Context, job *river.Job[SynthesizeArgs], out *engineOutput) error {
	a := job.Args
	stored := false
	defer func() {
		if !stored {
			os.Remove(out.raw)
		}
	}()
	output, releaseOutput, err := audio.ReadFilePooled(out.raw)
	if err != nil {
		return w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, fmt.Errorf("engine output: %w", err))
	}
	info, err := outputInfo(ctx, out.raw, output)
	if err != nil {
		releaseOutput()
		return w.fail(ctx, job.JobRow, a.LineID, a.RenderSeq, fmt.Errorf("engine output: %w", err))
	}
	blob := studio.Blob{SHA256: blobhash.Bytes(output), SizeBytes: int64(len(output)), Format: info.Format,
		DurationMs: int(info.Duration.Milliseconds()), SampleRate: info.SampleRate, Channels: info.Channels}
	if err := w.blobs.Put(out.raw, blob.SHA256); err != nil {
		releaseOutput()
		return err
	}
	stored = true
	out.blob, out.info, out.bytes, out.release = blob, info, output, releaseOutput
	return nil
}

// handToFit moves the line on to fitting and fits the take. The synthesis fits it
// itself (its permit is already given back): no fit job to insert, fetch and
// complete, and the output is not read again. Only where this worker's fits back up
// (fitHere) is the take handed to a fit job, inserted with the state change, which
// any worker takes on.
func (w *Worker) handToFit(ctx context.Context, job *river.Job[SynthesizeArgs], in *studio.RenderInput, out *engineOutput) error {
	a := job.Args
	fit := FitArgs{LineID: a.LineID, RenderSeq: a.RenderSeq, ProjectID: a.ProjectID, Revision: in.Line.Revision,
		RawSHA256: out.blob.SHA256, SpokenText: out.spokenText, Engine: out.res.Engine, ModelVersion: out.res.ModelVersion,
		Device: out.device, Worker: w.cfg.Name, Seed: out.seed, Deterministic: out.res.Deterministic,
		PeakBytes: out.res.LineVRAMBytes(), SynthMs: out.synthMs, AudioSeconds: out.info.Duration.Seconds(),
		Usage: out.usage}
	inline := w.fitHere()
	var handOff studio.HandOffFunc
	if inline {
		defer w.fitClaims.Add(-1)
	} else {
		handOff = func(ctx context.Context, tx *sql.Tx) error {
			_, err := w.pipeline.inserter.InsertTx(ctx, tx, fit, &river.InsertOpts{Priority: job.Priority})
			return err
		}
	}
	fitIn, err := w.store.StartFit(ctx, a.LineID, a.RenderSeq, handOff, out.blob)
	if errors.Is(err, studio.ErrNotFound) {
		return nil // stale: the blob's row is kept all the same, as its file is
	}
	if err != nil || !inline {
		return err
	}
	// The line shows fitting while it waits for a fit, as it does while a fit job
	// waits in the queue.
	if err := w.acquireFit(ctx); err != nil {
		return err
	}
	defer w.releaseFit()
	return w.fitTake(ctx, job.JobRow, fit, fitIn, out.bytes)
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
// endMs (the original actor's delivery, as an emotion reference). The media library
// cuts it once and keeps it as a blob shared with the review page; a missing source or
// a line past its end fails the line with the library's message.
func (w *Worker) sourceSegment(ctx context.Context, projectID int64, startMs, endMs int) (string, error) {
	blob, err := w.media.SourceSegment(ctx, projectID, startMs, endMs)
	var ie *i18n.Error
	if errors.Is(err, studio.ErrNotFound) && errors.As(err, &ie) {
		return "", userKey(ie.Key, ie.Args...)
	}
	if err != nil {
		return "", err
	}
	return w.blobs.Path(blob.SHA256)
}
