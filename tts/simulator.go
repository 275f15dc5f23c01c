package tts

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"dubstudio/blobhash"
	"dubstudio/internal/perm"
	"dubstudio/internal/simdev"
)

// Fault is a failure the simulator can be told to produce.
type Fault int

// Faults for fault tests.
const (
	FaultNone Fault = iota
	// FaultOOM fails the request with CodeOutOfMemory, as a CUDA OOM would.
	FaultOOM
	// FaultHang blocks the request until its context ends.
	FaultHang
	// FaultCrash kills the simulated host: this request and every later one fail with
	// CodeUnavailable, and its device memory is freed, until Restart.
	FaultCrash
	// FaultInvalid fails the request with CodeInvalidInput.
	FaultInvalid
)

// Measured IndexTTS-2 figures (docs/indextts.md): memory after load and the extra peak
// of a request, 45 MB + 38 MB per second of audio.
const (
	SimResidentBytes      = 4_300_000_000
	SimPeakBaseBytes      = 45_000_000
	SimPeakPerSecondBytes = 38_000_000
)

// SimulatorConfig configures a Simulator. Zero values take IndexTTS-2's figures.
type SimulatorConfig struct {
	// Device is the simulated GPU the host lives on; required.
	Device *simdev.Device
	// ResidentBytes is the model's memory after load.
	ResidentBytes int64
	// PeakBaseBytes + PeakPerSecondBytes x audio seconds is a request's extra peak.
	PeakBaseBytes      int64
	PeakPerSecondBytes int64
	// TokensPerAudioSecond is how many mel tokens a second of audio takes (50; 2.5: 25).
	TokensPerAudioSecond float64
	// TokensPerSecond is the generation speed in tokens per wall second; 0 means no
	// delay at all (tests). About 110 matches a warm IndexTTS-2 process.
	TokensPerSecond float64
	// ConditioningSeconds is the delay of computing a speaker's conditioning.
	ConditioningSeconds float64
	// Concurrency declared in Info; default 1.
	Concurrency int
	// SampleRate of the written WAV; default 22050.
	SampleRate int
	// Version reported and used in conditioning cache keys; default "simulator-1".
	Version string
	// FollowTarget makes the audio last Request.TargetSeconds (times the duration
	// factor) when it is set, instead of PredictNaturalSeconds of the text.
	FollowTarget bool
	// Tone writes a quiet 220 Hz tone instead of silence.
	Tone bool
	// FaultFunc, when set, is asked for a fault for every request (after the injected
	// ones are used up).
	FaultFunc func(Request) Fault
	// Sleep waits d or until ctx ends; nil means SleepContext. Tests inject a fake.
	Sleep func(ctx context.Context, d time.Duration) error
	// Batch makes the simulator a batching host (protocol 2); nil: a version-1 host.
	Batch *SimBatch
}

// SimBatch shapes a simulated batching host: one process that holds its weights
// (SimulatorConfig.ResidentBytes) and a KV pool allocated at load, and decodes up to
// MaxSequences lines at once, each costing only its activations on top.
type SimBatch struct {
	// MaxSequences is the host's concurrency; default 32.
	MaxSequences int
	// Beams is the rows per line; default DefaultBeams.
	Beams int
	// KVCacheBytes is the KV pool allocated at load; default SimKVCacheBytes.
	KVCacheBytes int64
	// ActivationBytesPerSecond is a line's activations per audio second; default
	// SimActivationBytesPerSecond.
	ActivationBytesPerSecond int64
	// Slowdown is how much slower each line decodes per other line in the batch
	// (0.02: 2% each), so that throughput grows with the batch, less than linearly.
	Slowdown float64
	// Saturation is the batch from which the card is busy: with more lines decoding,
	// each decode step takes longer in proportion (batch/Saturation), so that
	// throughput stops growing there; 0: never. With Slowdown or Saturation and a
	// TokensPerSecond, a line decodes in steps, each at the speed of the batch then,
	// as continuous batching does.
	Saturation int
}

// Simulated batching host defaults.
const (
	SimKVCacheBytes             = 4_000_000_000
	SimActivationBytesPerSecond = 12_000_000
	simKVBytesPerToken          = 122_880
)

// SimulatorStats are the simulator's running totals.
type SimulatorStats struct {
	Requests             int64
	OOMs                 int64
	ConditioningComputed int64
	ConditioningLoaded   int64
}

// Simulator is an Engine that behaves like an IndexTTS-2 host without a GPU: latency
// proportional to tokens, memory on a simdev.Device, valid WAV files of the predicted
// length, a conditioning cache, and injectable faults. Safe for concurrent use.
type Simulator struct {
	cfg SimulatorConfig

	mu       sync.Mutex
	proc     *simdev.Process
	crashed  bool
	faults   []Fault
	speaker  string // reference SHA-256 of the conditioning in the "instance"
	stats    SimulatorStats
	inFlight int
	rowsMax  int // a batching simulator's most rows decoding at once
	// A batching simulator's sequences: a line decodes once fewer than MaxSequences
	// do and its KV fits the free pool; until then it waits in the host, as a
	// batching host's queue (batchChanged is closed and replaced when a line stops
	// decoding). A line that has decoded is in s2mel (and the vocoder) until it ends.
	batchChanged               chan struct{}
	waiting, decoding, inS2Mel int
	kvInUse                    int64   // the decoding lines' KV bytes
	decodeRate                 float64 // the decoding lines' tokens per second, one row each
}

var _ Engine = (*Simulator)(nil)

// NewSimulator loads the simulated model onto cfg.Device; it fails with
// CodeOutOfMemory when the model does not fit.
func NewSimulator(cfg SimulatorConfig) (*Simulator, error) {
	if cfg.Device == nil {
		return nil, errors.New("simulator: a simulated device is required")
	}
	if cfg.ResidentBytes == 0 {
		cfg.ResidentBytes = SimResidentBytes
	}
	if cfg.PeakBaseBytes == 0 {
		cfg.PeakBaseBytes = SimPeakBaseBytes
	}
	if cfg.PeakPerSecondBytes == 0 {
		cfg.PeakPerSecondBytes = SimPeakPerSecondBytes
	}
	if cfg.TokensPerAudioSecond == 0 {
		cfg.TokensPerAudioSecond = 50
	}
	cfg.Concurrency = max(cfg.Concurrency, 1)
	if cfg.SampleRate <= 0 {
		cfg.SampleRate = 22050
	}
	if cfg.Version == "" {
		cfg.Version = "simulator-1"
	}
	if cfg.Sleep == nil {
		cfg.Sleep = SleepContext
	}
	if b := cfg.Batch; b != nil {
		bc := *b
		bc.MaxSequences = cmp.Or(max(bc.MaxSequences, 0), 32)
		bc.Beams = cmp.Or(max(bc.Beams, 0), DefaultBeams)
		bc.KVCacheBytes = cmp.Or(max(bc.KVCacheBytes, 0), SimKVCacheBytes)
		bc.ActivationBytesPerSecond = cmp.Or(max(bc.ActivationBytesPerSecond, 0), SimActivationBytesPerSecond)
		cfg.Batch, cfg.Concurrency = &bc, bc.MaxSequences
		cfg.ResidentBytes += bc.KVCacheBytes // preallocated at load
	}
	s := &Simulator{cfg: cfg}
	if cfg.Batch != nil {
		s.batchChanged = make(chan struct{})
	}
	if err := s.spawn(); err != nil {
		return nil, err
	}
	return s, nil
}

// SleepContext waits d or until ctx ends: the simulator's Sleep unless a test sets one
// (a test's Sleep that gates the simulator and then waits calls it).
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Simulator) spawn() error {
	p, err := s.cfg.Device.Spawn(s.cfg.ResidentBytes)
	if err != nil {
		return &Error{Code: CodeOutOfMemory, Message: "loading the simulated model", Err: err}
	}
	s.proc = p
	s.crashed = false
	s.speaker = ""
	return nil
}

// Name returns "simulator".
func (s *Simulator) Name() string { return "simulator" }

// Process returns the simulated host process (for tests and the executor's checks).
func (s *Simulator) Process() *simdev.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// Inject queues faults for the next requests, one each.
func (s *Simulator) Inject(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, faults...)
}

// Restart respawns a crashed simulated host (its conditioning in memory is lost).
func (s *Simulator) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Exit()
	return s.spawn()
}

// Stats returns the running totals.
func (s *Simulator) Stats() SimulatorStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Info describes the simulated model; CodeUnavailable after a crash.
func (s *Simulator) Info(context.Context) (HostInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed {
		return HostInfo{}, s.unavailable()
	}
	return HostInfo{
		Model: "IndexTTS-2-simulator", Version: s.cfg.Version, ResidentBytes: s.cfg.ResidentBytes,
		Concurrency: s.cfg.Concurrency, Busy: s.inFlight, SampleRate: s.cfg.SampleRate, DurationControl: true,
	}, nil
}

// Close ends the simulated host and frees its device memory.
func (s *Simulator) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Exit()
	return nil
}

func (s *Simulator) unavailable() error {
	return &Error{Code: CodeUnavailable, Message: "the simulated host has crashed", Err: simdev.ErrExited}
}

// simConditioning is the content of a simulator conditioning cache file.
type simConditioning struct {
	Format          int    `json:"format"`
	ModelVersion    string `json:"model_version"`
	ReferenceSHA256 string `json:"reference_sha256"`
}

// PrepareSpeaker "computes" a speaker's conditioning (counted, and delayed by
// ConditioningSeconds) or loads it from CacheDir/<sha256>-<version>.cond.
func (s *Simulator) PrepareSpeaker(ctx context.Context, req PrepareRequest) (PrepareResult, error) {
	start := time.Now()
	if req.ReferenceAudioPath == "" {
		return PrepareResult{}, invalidf("reference audio path is empty")
	}
	sha, err := blobhash.File(req.ReferenceAudioPath)
	if err != nil {
		return PrepareResult{}, invalidf("reading reference audio: %v", err)
	}
	if req.ReferenceSHA256 != "" && req.ReferenceSHA256 != sha {
		return PrepareResult{}, invalidf("reference audio %s does not match its SHA-256", req.ReferenceAudioPath)
	}
	s.mu.Lock()
	if s.crashed {
		s.mu.Unlock()
		return PrepareResult{}, s.unavailable()
	}
	s.mu.Unlock()

	path := ""
	if req.CacheDir != "" {
		path = filepath.Join(req.CacheDir, sha+"-"+safeName(s.cfg.Version)+".cond")
		if s.loadConditioning(path, sha) {
			return PrepareResult{CachePath: path, Computed: false, Seconds: time.Since(start).Seconds()}, nil
		}
	}
	if err := s.computeConditioning(ctx, sha); err != nil {
		return PrepareResult{}, err
	}
	if path != "" {
		data, _ := json.Marshal(simConditioning{Format: 1, ModelVersion: s.cfg.Version, ReferenceSHA256: sha})
		if err := writeFileAtomic(path, data); err != nil {
			return PrepareResult{}, &Error{Code: CodeInternal, Message: "writing the conditioning cache", Err: err}
		}
	}
	return PrepareResult{CachePath: path, Computed: true, Seconds: time.Since(start).Seconds()}, nil
}

// loadConditioning restores a cache file into the "instance"; false when the file is
// missing or belongs to another model version or reference.
func (s *Simulator) loadConditioning(path, sha string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var c simConditioning
	if json.Unmarshal(data, &c) != nil || c.Format != 1 || c.ModelVersion != s.cfg.Version ||
		(sha != "" && c.ReferenceSHA256 != sha) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.speaker = c.ReferenceSHA256
	s.stats.ConditioningLoaded++
	return true
}

func (s *Simulator) computeConditioning(ctx context.Context, sha string) error {
	if err := s.cfg.Sleep(ctx, seconds(s.cfg.ConditioningSeconds)); err != nil {
		return fmt.Errorf("computing conditioning: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.speaker = sha
	s.stats.ConditioningComputed++
	return nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// nextFault pops an injected fault, else asks FaultFunc.
func (s *Simulator) nextFault(req Request) Fault {
	s.mu.Lock()
	if len(s.faults) > 0 {
		f := s.faults[0]
		s.faults = s.faults[1:]
		s.mu.Unlock()
		return f
	}
	s.mu.Unlock()
	if s.cfg.FaultFunc != nil {
		return s.cfg.FaultFunc(req)
	}
	return FaultNone
}

// AudioSecondsFor is how long the simulator's audio for req will be.
func (s *Simulator) AudioSecondsFor(req Request) float64 {
	factor := req.DurationFactor
	if factor == 0 {
		factor = 1
	}
	secs := PredictNaturalSeconds(req.Text, req.Language)
	if s.cfg.FollowTarget && req.TargetSeconds > 0 {
		secs = req.TargetSeconds
	}
	return secs * factor
}

// PeakBytesFor is the extra device memory a request of that many audio seconds takes.
func (s *Simulator) PeakBytesFor(audioSeconds float64) int64 {
	if b := s.cfg.Batch; b != nil {
		return int64(float64(b.ActivationBytesPerSecond) * audioSeconds)
	}
	return s.cfg.PeakBaseBytes + int64(float64(s.cfg.PeakPerSecondBytes)*audioSeconds)
}

// BatchInfo is a batching simulator's batch state, as a protocol-2 host reports it
// in /health; nil for a version-1 simulator.
func (s *Simulator) BatchInfo() *BatchInfo {
	b := s.cfg.Batch
	if b == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	decode := DecodeSample
	if b.Beams > 1 {
		decode = DecodeBeamSearch
	}
	return &BatchInfo{MaxSequences: b.MaxSequences, Beams: b.Beams, Decode: decode, BlockTokens: 32, KVBytesPerToken: simKVBytesPerToken,
		KVCacheBytes: b.KVCacheBytes, KVFreeBytes: max(b.KVCacheBytes-s.kvInUse, 0), PrefixTokens: 32,
		TokensPerSecond: s.cfg.TokensPerAudioSecond, ActivationBytesPerSecond: float64(b.ActivationBytesPerSecond),
		Decoding: s.decoding, InS2Mel: s.inS2Mel, Waiting: s.waiting, DecodeTokensPerSecond: s.decodeRate,
		BatchRowsMax: s.rowsMax}
}

// Synthesize simulates one request: it allocates the predicted peak on the device for
// as long as the generation takes and writes a WAV of the predicted length.
func (s *Simulator) Synthesize(ctx context.Context, req Request) (Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return Result{}, err
	}
	s.mu.Lock()
	if s.crashed {
		s.mu.Unlock()
		return Result{}, s.unavailable()
	}
	s.stats.Requests++
	s.inFlight++
	batch := s.inFlight
	proc := s.proc
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()

	switch s.nextFault(req) {
	case FaultOOM:
		s.mu.Lock()
		s.stats.OOMs++
		s.mu.Unlock()
		return Result{}, &Error{Code: CodeOutOfMemory, Message: "CUDA out of memory (injected)", Err: simdev.ErrOutOfMemory}
	case FaultInvalid:
		return Result{}, invalidf("the simulated model refused the input (injected)")
	case FaultHang:
		<-ctx.Done()
		return Result{}, fmt.Errorf("simulated host hung: %w", ctx.Err())
	case FaultCrash:
		s.mu.Lock()
		s.crashed = true
		s.proc.Exit()
		s.mu.Unlock()
		return Result{}, &Error{Code: CodeUnavailable, Message: "the simulated host crashed mid-request", Err: simdev.ErrExited}
	}

	audio := s.AudioSecondsFor(req)
	maxSecs := float64(req.MaxMelTokens) / s.cfg.TokensPerAudioSecond
	segments := max(1, math.Ceil(float64(len([]rune(req.Text)))/float64(req.MaxTextTokensPerSegment)))
	audio = min(audio, maxSecs*segments) // max_mel_tokens cuts each segment
	tokens := int(math.Round(audio * s.cfg.TokensPerAudioSecond))

	stages := map[string]float64{}
	seq := &simSequence{s: s}
	defer seq.end()
	if s.batchChanged != nil {
		// A batching host: the line waits for a place in the batch and its KV
		// blocks, then decodes beside the others.
		var err error
		if batch, err = seq.join(ctx, int64(tokens+32)*simKVBytesPerToken*int64(s.cfg.Batch.Beams)); err != nil {
			return Result{}, fmt.Errorf("simulated synthesis: %w", err)
		}
		stages["queue"] = seq.queued.Seconds()
	}
	start := time.Now()
	if err := s.ensureSpeaker(ctx, req.Speaker); err != nil {
		return Result{}, err
	}
	stages["conditioning"] = time.Since(start).Seconds()
	peak := s.PeakBytesFor(audio / segments) // segments run one after another
	var gen time.Duration
	if s.cfg.TokensPerSecond > 0 {
		gen = seconds(float64(tokens) / s.cfg.TokensPerSecond)
	}
	stepped := s.cfg.Batch != nil && gen > 0 && (s.cfg.Batch.Slowdown > 0 || s.cfg.Batch.Saturation > 0)

	if err := proc.Alloc(peak); err != nil {
		proc.EmptyCache() // as the real host does after an OOM
		s.mu.Lock()
		s.stats.OOMs++
		s.mu.Unlock()
		if errors.Is(err, simdev.ErrExited) {
			return Result{}, s.unavailable()
		}
		return Result{}, &Error{Code: CodeOutOfMemory, Message: "CUDA out of memory", Err: err}
	}
	st := proc.Stats()
	var sleepErr error
	if s.batchChanged != nil {
		// The GPT part decodes beside the batch (slowed by it where SimBatch says so),
		// then the line is in s2mel.
		gpt := seconds(0.8 * gen.Seconds())
		seq.decode(float64(tokens) / max(gpt.Seconds(), 1e-3))
		took := gpt
		if stepped {
			took, sleepErr = s.decodeBatched(ctx, gpt)
		} else {
			sleepErr = s.cfg.Sleep(ctx, gpt)
		}
		if sleepErr == nil {
			seq.toS2Mel()
			sleepErr = s.cfg.Sleep(ctx, gen-gpt)
		}
		gen = took + gen - gpt
	} else {
		sleepErr = s.cfg.Sleep(ctx, gen)
	}
	proc.Release(peak)
	if sleepErr != nil {
		return Result{}, fmt.Errorf("simulated synthesis: %w", sleepErr)
	}
	stages["gpt"] = 0.8 * gen.Seconds()
	stages["s2mel"] = 0.15 * gen.Seconds()
	stages["vocoder"] = 0.05 * gen.Seconds()

	n := int(math.Round(audio * float64(s.cfg.SampleRate)))
	samples := make([]int16, n)
	if s.cfg.Tone {
		for i := range samples {
			samples[i] = int16(3000 * math.Sin(2*math.Pi*220*float64(i)/float64(s.cfg.SampleRate)))
		}
	}
	if err := WriteWAV(req.OutputPath, s.cfg.SampleRate, samples); err != nil {
		return Result{}, &Error{Code: CodeInternal, Message: "writing the take", Err: err}
	}
	stages["total"] = time.Since(start).Seconds()
	factor := req.DurationFactor
	if factor == 0 {
		factor = 1
	}
	res := Result{
		Engine: s.Name(), ModelVersion: s.cfg.Version, OutputPath: req.OutputPath,
		SampleRate: s.cfg.SampleRate, AudioSeconds: float64(n) / float64(s.cfg.SampleRate),
		Tokens: tokens, Stages: stages,
		PeakAllocatedBytes: s.cfg.ResidentBytes + st.Allocated,
		PeakReservedBytes:  s.cfg.ResidentBytes + st.Reserved,
		DurationFactor:     factor,
	}
	if b := s.cfg.Batch; b != nil {
		// A batching host reports the line's own share (protocol 2): its KV blocks
		// (in the pool, allocated at load) and its activations.
		kv := int64(tokens+32) * simKVBytesPerToken * int64(b.Beams)
		res.PeakAllocatedBytes = kv + peak
		res.Sequence = &SequenceInfo{KVBytes: kv, ActivationBytes: peak, QueueSeconds: stages["queue"],
			GPTSeconds: stages["gpt"], S2MelSeconds: stages["s2mel"], VocoderSeconds: stages["vocoder"],
			BatchRowsMean: float64(batch * b.Beams), S2MelGroup: 1}
	}
	return res, nil
}

// simDecodeSteps is how many parts a batching simulator's line decodes in, each at
// the speed of the batch at its start.
const simDecodeSteps = 8

// decodeBatched sleeps a line's generation of alone seconds alone in simDecodeSteps
// parts, each slowed by the batch decoding then (SimBatch.Slowdown and Saturation);
// it returns the time it took.
func (s *Simulator) decodeBatched(ctx context.Context, alone time.Duration) (time.Duration, error) {
	b := s.cfg.Batch
	var took time.Duration
	for range simDecodeSteps {
		s.mu.Lock()
		n := float64(max(s.inFlight, 1))
		s.mu.Unlock()
		f := 1 + b.Slowdown*(n-1)
		if b.Saturation > 0 {
			f *= max(1, n/float64(b.Saturation))
		}
		d := seconds(alone.Seconds() / simDecodeSteps * f)
		took += d
		if err := s.cfg.Sleep(ctx, d); err != nil {
			return took, err
		}
	}
	return took, nil
}

// simSequence is one line's way through a batching simulator: waiting for a place
// in the batch, decoding, in s2mel, ended; each step moves the simulator's counts
// (BatchInfo).
type simSequence struct {
	s      *Simulator
	stage  int // 0 none, 1 waiting, 2 decoding, 3 in s2mel
	queued time.Duration
	kv     int64
	rate   float64
}

// join waits for a place in the batch and kv bytes of free KV pool (a line alone
// always gets in), books them, and returns the lines decoding with it.
func (q *simSequence) join(ctx context.Context, kv int64) (int, error) {
	s := q.s
	asked := time.Now()
	s.mu.Lock()
	s.waiting++
	q.stage = 1
	for s.decoding >= s.cfg.Batch.MaxSequences || s.decoding > 0 && s.kvInUse+kv > s.cfg.Batch.KVCacheBytes {
		changed := s.batchChanged
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	q.queued = time.Since(asked)
	s.waiting--
	s.decoding++
	s.kvInUse += kv
	q.stage, q.kv = 2, kv
	s.rowsMax = max(s.rowsMax, s.decoding*s.cfg.Batch.Beams)
	return s.decoding, nil
}

// decode books the line's decode rate while it decodes.
func (q *simSequence) decode(rate float64) {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.rate = rate
	q.s.decodeRate += rate
}

// toS2Mel ends the line's decoding: its place in the batch goes to the next line.
func (q *simSequence) toS2Mel() {
	s := q.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.stage != 2 {
		return
	}
	q.leaveDecodingLocked()
	s.inS2Mel++
	q.stage = 3
}

func (q *simSequence) leaveDecodingLocked() {
	s := q.s
	s.decoding--
	s.kvInUse -= q.kv
	s.decodeRate = max(s.decodeRate-q.rate, 0)
	q.kv, q.rate = 0, 0
	close(s.batchChanged)
	s.batchChanged = make(chan struct{})
}

// end takes the line out of whatever stage it is in.
func (q *simSequence) end() {
	s := q.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch q.stage {
	case 1:
		s.waiting--
	case 2:
		q.leaveDecodingLocked()
	case 3:
		s.inS2Mel--
	}
	q.stage = 0
}

// ensureSpeaker puts the speaker's conditioning in the "instance", from its cache file
// when there is one, computing it otherwise, as IndexTTS does on a speaker change.
func (s *Simulator) ensureSpeaker(ctx context.Context, sp Speaker) error {
	if sp.ConditioningPath != "" {
		s.mu.Lock()
		cur := s.speaker
		s.mu.Unlock()
		var c simConditioning
		if data, err := os.ReadFile(sp.ConditioningPath); err == nil && json.Unmarshal(data, &c) == nil &&
			c.ReferenceSHA256 != "" && c.ReferenceSHA256 == cur {
			return nil
		}
		if s.loadConditioning(sp.ConditioningPath, "") {
			return nil
		}
	}
	if sp.ReferenceAudioPath == "" {
		return nil // nothing to condition on: the simulator does not mind
	}
	sha, err := blobhash.File(sp.ReferenceAudioPath)
	if err != nil {
		return invalidf("reading reference audio: %v", err)
	}
	s.mu.Lock()
	same := s.speaker == sha
	s.mu.Unlock()
	if same {
		return nil
	}
	return s.computeConditioning(ctx, sha)
}

// safeName keeps [A-Za-z0-9._@+-] and replaces the rest with "_", as the Python hosts do
// for cache file names.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '@' || c == '+' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), perm.Dir); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cond-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
