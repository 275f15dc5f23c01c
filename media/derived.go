package media

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"dubstudio/audio"
	"dubstudio/i18n"
	"dubstudio/studio"
)

// MaxRangeMs bounds the length of a range of lines mixed by RangeMix.
const MaxRangeMs = 10 * 60 * 1000

// speechThreshold is the level (of 16-bit full scale) above which a take's sample
// counts as speech for SpeechBounds: about -40 dBFS.
const speechThreshold = 328

// SourceSegment returns the blob of a project's source audio between startMs and
// endMs: exactly that long, at 48 kHz, padded with silence where the source ends
// first. It is cut once per source and timing and kept in the derived audio cache,
// so the review page playing a line's original and a worker taking it as an emotion
// reference share one file. Without source audio, for an empty range or one that
// starts after the end of the source, the error unwraps to studio.ErrNotFound and to
// an *i18n.Error saying which.
func (l *Library) SourceSegment(ctx context.Context, projectID int64, startMs, endMs int) (*studio.Blob, error) {
	src, err := l.store.ProjectSource(ctx, projectID)
	if errors.Is(err, studio.ErrNotFound) {
		return nil, i18n.Errorf(studio.ErrNotFound, "source.missing")
	}
	if err != nil {
		return nil, err
	}
	if endMs <= startMs {
		return nil, i18n.Errorf(studio.ErrNotFound, "source.no_segment")
	}
	if startMs >= src.DurationMs {
		return nil, i18n.Errorf(studio.ErrNotFound, "source.after_end")
	}
	in, err := l.blobs.Path(src.AudioSHA256)
	if err != nil {
		return nil, err
	}
	blob, err := l.store.DerivedAudio(ctx, l.blobs, SourceSegmentKey(src.AudioSHA256, startMs, endMs),
		func(ctx context.Context, out string) (studio.Blob, error) {
			err := audio.Segment(ctx, in, time.Duration(startMs)*time.Millisecond, time.Duration(endMs)*time.Millisecond, out)
			return studio.Blob{Format: audio.FormatWAV, DurationMs: endMs - startMs, SampleRate: audio.DefaultSampleRate, Channels: src.Channels}, err
		})
	if err != nil {
		return nil, fmt.Errorf("error cutting the source segment %d-%d ms: %w", startMs, endMs, err)
	}
	return blob, nil
}

// RangeMix is a range of lines mixed as they sound on the timeline.
type RangeMix struct {
	// FirstIdx and LastIdx are the indexes of the range's first and last lines.
	FirstIdx, LastIdx int
	// StartMs and EndMs bound the mix on the timeline: from the first line's start to
	// the end of the last line or of its take, whichever is later.
	StartMs, EndMs int
	// Blob is the mix: 48 kHz mono WAV.
	Blob *studio.Blob
}

// RangeMix mixes the lines of a project with lineIDs as they will sound on the
// timeline: each line's take (the approved one, or else the current one) at its
// timecode, silence between, placed exactly as the export places it. The mix is
// cached by what it is made of, so the same range again costs nothing. A range with
// no line of the project, longer than MaxRangeMs, or without any take is refused
// with an error that unwraps to studio.ErrInvalid and to an *i18n.Error.
func (l *Library) RangeMix(ctx context.Context, projectID int64, lineIDs []int64) (*RangeMix, error) {
	lines, err := l.store.LinesByIDs(ctx, projectID, lineIDs)
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, i18n.Errorf(studio.ErrInvalid, "range.none")
	}
	takeIDs := make([]int64, 0, len(lines))
	for _, ln := range lines {
		if id := rangeTake(ln); id != nil {
			takeIDs = append(takeIDs, *id)
		}
	}
	takes, err := l.store.TakesByIDs(ctx, takeIDs)
	if err != nil {
		return nil, err
	}
	mix := &RangeMix{FirstIdx: lines[0].Idx, LastIdx: lines[len(lines)-1].Idx, StartMs: lines[0].StartMs}
	for _, ln := range lines {
		mix.StartMs = min(mix.StartMs, ln.StartMs)
		mix.EndMs = max(mix.EndMs, ln.EndMs)
		if id := rangeTake(ln); id != nil {
			if t, ok := takes[*id]; ok {
				mix.EndMs = max(mix.EndMs, ln.StartMs+t.DurationMs)
			}
		}
	}
	if mix.EndMs-mix.StartMs > MaxRangeMs {
		return nil, i18n.Errorf(studio.ErrInvalid, "range.too_long", MaxRangeMs/60000)
	}
	const rate = audio.DefaultSampleRate
	origin := audio.SamplesFor(mix.StartMs, rate)
	samples := max(audio.SamplesFor(mix.EndMs, rate)-origin, 1)
	var clips []audio.Clip
	key := []string{strconv.Itoa(rate), strconv.FormatInt(origin, 10), strconv.FormatInt(samples, 10)}
	for _, ln := range lines {
		id := rangeTake(ln)
		if id == nil {
			continue
		}
		t, ok := takes[*id]
		if !ok {
			continue
		}
		path, err := l.blobs.Path(t.AudioSHA256)
		if err != nil {
			return nil, err
		}
		off := audio.SamplesFor(ln.StartMs, rate) - origin
		clips = append(clips, audio.Clip{Path: path, Offset: off})
		key = append(key, t.AudioSHA256+"@"+strconv.FormatInt(off, 10))
	}
	if len(clips) == 0 {
		return nil, i18n.Errorf(studio.ErrInvalid, "range.no_takes")
	}
	mix.Blob, err = l.store.DerivedAudio(ctx, l.blobs, derivedKey("range", key...),
		func(ctx context.Context, out string) (studio.Blob, error) {
			_, err := audio.Assemble(ctx, audio.AssembleParams{OutputPath: out, SampleRate: rate, Channels: 1, Samples: samples, Clips: clips})
			return studio.Blob{Format: audio.FormatWAV, DurationMs: int(samples * 1000 / rate), SampleRate: rate, Channels: 1}, err
		})
	if err != nil {
		return nil, fmt.Errorf("error assembling lines %d-%d: %w", mix.FirstIdx, mix.LastIdx, err)
	}
	return mix, nil
}

// rangeTake is the take of l that plays in a range: the approved one, else the current.
func rangeTake(l studio.Line) *int64 {
	if l.ApprovedTakeID != nil {
		return l.ApprovedTakeID
	}
	return l.CurrentTakeID
}

// SpeechBounds finds where a take's speech starts and ends, in ms from its start;
// -1, -1 when the take cannot be read or is silent.
func (l *Library) SpeechBounds(t studio.Take) (startMs, endMs int) {
	path, err := l.blobs.Path(t.AudioSHA256)
	if err != nil {
		return -1, -1
	}
	pcm, err := audio.ReadWAVFile(path)
	if err != nil || pcm.Frames() == 0 {
		return -1, -1
	}
	first, last := -1, -1
	for i, v := range pcm.Samples {
		if v > speechThreshold || v < -speechThreshold {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return -1, -1
	}
	ch := pcm.Channels
	return first / ch * 1000 / pcm.SampleRate, (last/ch + 1) * 1000 / pcm.SampleRate
}

// SourceSegmentKey names the segment [startMs, endMs) of a source audio blob in the
// derived audio cache.
func SourceSegmentKey(sourceSHA string, startMs, endMs int) string {
	return "segment:" + sourceSHA + ":" + strconv.Itoa(startMs) + ":" + strconv.Itoa(endMs)
}

// derivedKey hashes a description of derived audio (what it is made from, in order)
// into a cache key of bounded length.
func derivedKey(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return kind + ":" + hex.EncodeToString(h.Sum(nil))
}
