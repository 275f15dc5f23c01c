package workflow

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"dubstudio/audio"
	"dubstudio/internal/perm"
	"dubstudio/studio"
	"dubstudio/studio/script"
)

// zipTime is the modification time written for every archive entry, so that the same
// takes always give the same bytes.
var zipTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// exportWorker works export jobs: it builds an export's archive (buildExport) and
// records the outcome.
type exportWorker struct {
	river.WorkerDefaults[ExportArgs]
	w *Worker
	// build builds the archive (nil: buildExport; tests put a failing one).
	build buildExportFunc
}

// buildExportFunc builds an export's archive, as buildExport does.
type buildExportFunc func(ctx context.Context, ex *studio.Export) (int, int64, []studio.LeftOutLine, error)

func (e *exportWorker) Timeout(*river.Job[ExportArgs]) time.Duration { return time.Hour }

// Work builds the archive and records the outcome; an error no step recorded, or a
// panic, fails the export's attempt as failExport does (settleWith).
func (e *exportWorker) Work(ctx context.Context, job *river.Job[ExportArgs]) error {
	return settleWith(func() error { return e.work(ctx, job) },
		func(err error) error { return e.w.failExport(ctx, job.JobRow, job.Args.ExportID, err) })
}

func (e *exportWorker) work(ctx context.Context, job *river.Job[ExportArgs]) error {
	w := e.w
	ex, err := w.store.Export(ctx, job.Args.ProjectID, job.Args.ExportID)
	if errors.Is(err, studio.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	build := e.build
	if build == nil {
		build = w.buildExport
	}
	n, size, leftOut, err := build(ctx, ex)
	if err != nil {
		return w.failExport(ctx, job.JobRow, ex.ID, err)
	}
	if err := w.store.FinishExport(ctx, ex.ID, n, size, leftOut, ""); err != nil {
		// The archive is built: its last attempt must not fail the export for a
		// write that failed. An earlier one is queued with the error (settleWith).
		return w.unwritten(ctx, lastAttempt(job.JobRow), fmt.Errorf("error recording the export: %w", err), "export", ex.ID)
	}
	return nil
}

// failExport records a failed attempt of export id and returns what River should do
// with its job. What the export lacks (takes) fails it at once; anything else is
// tried again, the row queued with the error meanwhile, and failed on the last
// attempt.
func (w *Worker) failExport(ctx context.Context, job *rivertype.JobRow, id int64, err error) error {
	if w.interrupted(ctx) {
		return w.interrupt(ctx, err, func(ctx context.Context) error { return w.store.RetryExport(ctx, id, "") }, "export", id)
	}
	var f *failure
	final := errors.As(err, &f) || lastAttempt(job)
	return w.record(ctx, err, final, func(ctx context.Context) error {
		if final {
			return w.store.FinishExport(ctx, id, 0, 0, nil, exportError(err))
		}
		return w.store.RetryExport(ctx, id, exportError(err))
	}, "export", id)
}

// exportError is what an export's row says of err, as a message key and its
// arguments (views.RenderError shows it in the reader's language).
func exportError(err error) string {
	var f *failure
	switch {
	case errors.As(err, &f):
	case errors.Is(err, audio.ErrNoSpace):
		f = &failure{key: "export.no_space"}
	default:
		f = &failure{key: "export.internal", args: []any{err.Error()}}
	}
	return f.text()
}

// safeName turns a character name into a file name part: letters and digits of any
// script, '-' and '_' only.
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case unicode.IsSpace(r) || r == '.':
			b.WriteRune('_')
		}
	}
	out := []rune(b.String())
	if len(out) > 40 {
		out = out[:40]
	}
	if len(out) == 0 {
		return "none"
	}
	return string(out)
}

// stemNames gives each character's stem a file name (safeName, "none" for lines
// without a character), keyed by that name. Names that safeName or a file system that
// ignores case would merge ("Mr. X" and "Mr_X", a character called "None" and the
// unassigned lines) get "-2", "-3" ... in the order of the characters' names, so no
// character's stem overwrites another's.
func stemNames(byChar map[string][]audio.Clip) map[string]string {
	chars := make([]string, 0, len(byChar))
	for c := range byChar {
		chars = append(chars, c)
	}
	sort.Strings(chars)
	out := make(map[string]string, len(chars))
	taken := map[string]bool{}
	for _, c := range chars {
		base := safeName(c)
		name := base
		for n := 2; taken[strings.ToLower(name)]; n++ {
			name = base + "-" + strconv.Itoa(n)
		}
		taken[strings.ToLower(name)] = true
		out[name] = c
	}
	return out
}

func timecodeName(ms int) string {
	return fmt.Sprintf("%02d-%02d-%02d.%03d", ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
}

// buildExport writes the archive: per-line WAVs, the mix, stems, subtitles with final
// timings and the manifest. It returns how many lines went in and which were left out.
func (w *Worker) buildExport(ctx context.Context, ex *studio.Export) (int, int64, []studio.LeftOutLine, error) {
	project, err := w.store.Project(ctx, ex.ProjectID)
	if err != nil {
		return 0, 0, nil, err
	}
	lines, leftOut, err := w.store.ExportLines(ctx, ex.ProjectID, ex.ApprovedOnly, ex.IncludeStale)
	if err != nil {
		return 0, 0, nil, err
	}
	if len(lines) == 0 && len(leftOut) > 0 {
		return 0, 0, nil, userKey("export.no_takes_stale")
	}
	if len(lines) == 0 {
		return 0, 0, nil, userKey("export.no_takes")
	}
	programme, err := w.store.ProgrammeMs(ctx, ex.ProjectID)
	if err != nil {
		return 0, 0, nil, err
	}
	const rate = audio.DefaultSampleRate
	timeRef, err := studio.TimecodeSamples(ex.StartTimecode, ex.FPS, rate)
	if err != nil {
		return 0, 0, nil, err
	}
	work, err := os.MkdirTemp(filepath.Join(w.cfg.DataDir, "tmp"), "export-*")
	if err != nil {
		return 0, 0, nil, err
	}
	defer os.RemoveAll(work)
	progress := func(p int) { _ = w.store.ExportProgress(ctx, ex.ID, p) }
	progress(1)

	channels := 1
	if ex.Stereo {
		channels = 2
	}
	man := Manifest{Project: project.Name, SampleRate: rate, Channels: channels, BitDepth: ex.BitDepth,
		StartTimecode: ex.StartTimecode, FPS: ex.FPS, TimeReference: timeRef, LeftOut: leftOut}
	if man.LeftOut == nil {
		man.LeftOut = []studio.LeftOutLine{}
	}
	byChar := map[string][]audio.Clip{}
	var all []audio.Clip
	type entry struct{ name, path string }
	var files []entry
	var cues, assCues []script.Cue
	for i, el := range lines {
		src, err := w.blobs.Path(el.Take.AudioSHA256)
		if err != nil {
			return 0, 0, nil, err
		}
		pcm, err := audio.ReadWAVFile(src)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("take %d: %w", el.Take.ID, err)
		}
		if pcm.SampleRate != rate {
			return 0, 0, nil, fmt.Errorf("take %d is %d Hz, not %d", el.Take.ID, pcm.SampleRate, rate)
		}
		frames := int64(pcm.Frames())
		offset := audio.SamplesFor(el.Line.StartMs, rate)
		clip := audio.Clip{Path: src, Offset: offset}
		stem := safeName(el.Character)
		byChar[el.Character] = append(byChar[el.Character], clip)
		all = append(all, clip)
		man.Samples = max(man.Samples, offset+frames)
		name := fmt.Sprintf("lines/%04d_%s_%s.wav", el.Line.Idx, timecodeName(el.Line.StartMs), stem)
		files = append(files, entry{name, src})
		endMs := el.Line.StartMs + int(frames*1000/rate)
		man.Lines = append(man.Lines, ManifestLine{Index: el.Line.Idx, StartMs: el.Line.StartMs, EndMs: endMs,
			SlotStartMs: el.Line.StartMs, SlotEndMs: el.Line.EndMs, BorrowedMs: el.Take.BorrowedMs, Stale: el.Stale(),
			Character: el.Character, Text: el.Line.Text, SpokenText: el.Take.SpokenText, TakeID: el.Take.ID,
			Approved: el.Line.ApprovedTakeID != nil && *el.Line.ApprovedTakeID == el.Take.ID, Engine: el.Take.Engine,
			ModelVersion: el.Take.ModelVersion, DurationMs: int(frames * 1000 / rate), Samples: frames,
			StretchRatio: el.Take.StretchRatio, File: name, SHA256: el.Take.AudioSHA256})
		cue := script.Cue{Start: time.Duration(el.Line.StartMs) * time.Millisecond,
			End: time.Duration(endMs) * time.Millisecond, Text: el.Line.Text, Character: el.Character}
		// ASS keeps the actor in its Name field, which players do not show.
		assCues = append(assCues, cue)
		if !ex.SpeakerNames {
			cue.Character = ""
		}
		cues = append(cues, cue)
		if i%50 == 0 {
			progress(1 + 30*i/len(lines))
		}
	}
	// The programme runs to the end of the last line's slot (or the source audio's
	// end), whichever is later, or to the end of a take that runs past both; every mix
	// and stem is that long, with silence where a line is not exported.
	man.Samples = max(man.Samples, audio.SamplesFor(programme, rate))
	assemble := func(path string, clips []audio.Clip) (audio.AssembleResult, error) {
		return audio.Assemble(ctx, audio.AssembleParams{OutputPath: path, SampleRate: rate, Channels: channels,
			BitDepth: ex.BitDepth, TimeReference: &timeRef, Samples: man.Samples, Clips: clips})
	}
	mix := filepath.Join(work, "mix.wav")
	mixed, err := assemble(mix, all)
	if err != nil {
		return 0, 0, nil, err
	}
	man.ClippedSamples = mixed.ClippedSamples
	files = append(files, entry{"mix.wav", mix})
	progress(55)
	stemFiles := stemNames(byChar)
	stems := make([]string, 0, len(byChar))
	for name := range stemFiles {
		stems = append(stems, name)
	}
	sort.Strings(stems)
	for i, name := range stems {
		path := filepath.Join(work, "stem-"+strconv.Itoa(i)+".wav")
		if _, err := assemble(path, byChar[stemFiles[name]]); err != nil {
			return 0, 0, nil, err
		}
		files = append(files, entry{"stems/" + name + ".wav", path})
		man.Stems = append(man.Stems, "stems/"+name+".wav")
		progress(55 + 30*(i+1)/len(stems))
	}
	bedFiles, bedMan, err := w.exportBed(ctx, ex, work, channels, timeRef, man.Samples, mix)
	if err != nil {
		return 0, 0, nil, err
	}
	for _, e := range bedFiles {
		files = append(files, entry{e[0], e[1]})
	}
	man.Bed = bedMan
	progress(95)
	var srt, vtt, ass, manifestCSV bytes.Buffer
	if err := script.WriteSRT(&srt, cues); err != nil {
		return 0, 0, nil, err
	}
	if err := script.WriteASS(&ass, assCues); err != nil {
		return 0, 0, nil, err
	}
	if err := script.WriteVTT(&vtt, cues); err != nil {
		return 0, 0, nil, err
	}
	manifestJSON, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return 0, 0, nil, err
	}
	cw := csv.NewWriter(&manifestCSV)
	cw.Write([]string{"index", "start_ms", "end_ms", "character", "text", "take_id", "approved", "duration_ms", "samples", "stretch_ratio", "file", "sha256",
		"slot_start_ms", "slot_end_ms", "borrowed_ms", "stale"})
	for _, l := range man.Lines {
		cw.Write([]string{strconv.Itoa(l.Index), strconv.Itoa(l.StartMs), strconv.Itoa(l.EndMs), studio.CSVCell(l.Character), studio.CSVCell(l.Text),
			strconv.FormatInt(l.TakeID, 10), strconv.FormatBool(l.Approved), strconv.Itoa(l.DurationMs),
			strconv.FormatInt(l.Samples, 10), strconv.FormatFloat(l.StretchRatio, 'f', 4, 64), l.File, l.SHA256,
			strconv.Itoa(l.SlotStartMs), strconv.Itoa(l.SlotEndMs), strconv.Itoa(l.BorrowedMs), strconv.FormatBool(l.Stale)})
	}
	cw.Flush()

	dst := ExportPath(w.cfg.DataDir, ex.ID)
	if err := os.MkdirAll(filepath.Dir(dst), perm.Dir); err != nil {
		return 0, 0, nil, err
	}
	tmp := dst + ".part"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm.File)
	if err != nil {
		return 0, 0, nil, err
	}
	zw := zip.NewWriter(f)
	add := func(name string, r io.Reader) error {
		hw, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store, Modified: zipTime})
		if err != nil {
			return err
		}
		_, err = io.Copy(hw, r)
		return err
	}
	err = func() error {
		for _, e := range files {
			src, err := os.Open(e.path)
			if err != nil {
				return err
			}
			err = add(e.name, src)
			src.Close()
			if err != nil {
				return err
			}
		}
		for _, doc := range []struct {
			name string
			body []byte
		}{{"subtitles.srt", srt.Bytes()}, {"subtitles.vtt", vtt.Bytes()}, {"subtitles.ass", ass.Bytes()}, {"manifest.json", manifestJSON}, {"manifest.csv", manifestCSV.Bytes()}} {
			if err := add(doc.name, bytes.NewReader(doc.body)); err != nil {
				return err
			}
		}
		return zw.Close()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		if errors.Is(err, syscall.ENOSPC) {
			return 0, 0, nil, fmt.Errorf("%w: %w", audio.ErrNoSpace, err)
		}
		return 0, 0, nil, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, 0, nil, err
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return 0, 0, nil, err
	}
	return len(lines), fi.Size(), leftOut, nil
}

// Bed files in an export's archive.
const (
	bedStemName = "bed.wav"
	bedMixName  = "mix_over_bed.wav"
)

// exportBed lays the project's bed, when it has one, against the programme: its own
// stem (bed.wav: from 0, trimmed or padded to samples, in the stems' channels, bit
// depth and time reference) and, when the export asks, the dialogue mix over it
// (mix_over_bed.wav: the bed ducked under the lines, loudness-normalised). It returns
// the archive's (name, path) pairs and the manifest's account; none without a bed.
func (w *Worker) exportBed(ctx context.Context, ex *studio.Export, work string, channels int, timeRef, samples int64, dialogue string) ([][2]string, *ManifestBed, error) {
	bed, err := w.store.ProjectBed(ctx, ex.ProjectID)
	if errors.Is(err, studio.ErrNotFound) {
		if ex.BedMix {
			return nil, nil, errors.New("the mix over the bed was asked for, but the project has no bed (removed since the export was queued)")
		}
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	in, err := w.blobs.Path(bed.AudioSHA256)
	if err != nil {
		return nil, nil, err
	}
	const rate = audio.DefaultSampleRate
	stem := filepath.Join(work, "bed.wav")
	if err := audio.RenderBed(ctx, audio.BedParams{InputPath: in, OutputPath: stem, SampleRate: rate, Channels: channels,
		BitDepth: ex.BitDepth, TimeReference: &timeRef, Samples: samples}); err != nil {
		return nil, nil, fmt.Errorf("the bed: %w", err)
	}
	man := &ManifestBed{File: bedStemName, Kind: string(bed.Kind), SourceFile: bed.FileName, SourceSHA256: bed.AudioSHA256,
		SourceDurationMs: bed.DurationMs, Samples: samples}
	out := [][2]string{{bedStemName, stem}}
	if !ex.BedMix {
		return out, man, nil
	}
	target := float64(w.cfg.BedMixLUFS)
	if target == 0 {
		target = audio.DefaultMixLUFS
	}
	mixed := filepath.Join(work, "mix-over-bed.wav")
	duck := w.cfg.BedDuck.WithDefaults()
	res, err := audio.MixOverBed(ctx, audio.BedMixParams{DialoguePath: dialogue, BedPath: stem, OutputPath: mixed,
		SampleRate: rate, Channels: channels, BitDepth: ex.BitDepth, TimeReference: &timeRef, Samples: samples,
		Duck: duck, Normalize: true, TargetLUFS: target, TruePeakDB: audio.DefaultMixTruePeakDB})
	if err != nil {
		return nil, nil, fmt.Errorf("the mix over the bed: %w", err)
	}
	man.Mix = &ManifestBedMix{File: bedMixName, TargetLUFS: target, TruePeakDB: audio.DefaultMixTruePeakDB,
		MeasuredLUFS: res.InputLUFS, MeasuredTruePeakDB: res.InputTruePeakDB, GainDB: res.GainDB, Limited: res.Limited,
		Ducking: "sidechaincompress", DuckThresholdDB: duck.ThresholdDB, DuckRatio: duck.Ratio,
		DuckAttackMs: duck.AttackMs, DuckReleaseMs: duck.ReleaseMs}
	return append(out, [2]string{bedMixName, mixed}), man, nil
}
