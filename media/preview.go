package media

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"dubstudio/audio"
	"dubstudio/i18n"
	"dubstudio/studio"
)

// PreviewOpts choose what the picture's dub preview plays.
type PreviewOpts struct {
	// Approved plays each line's approved take only; otherwise its current (latest
	// chosen) take.
	Approved bool
	// FillOriginal plays the original performance's segment for a line without such a
	// take; otherwise silence.
	FillOriginal bool
	// Bed plays the dub over the project's music-and-effects bed, ducked under the
	// lines as in the export's mix over the bed (not loudness-normalised); without a
	// bed, or false, the dub alone.
	Bed bool
}

// PreviewMix returns the dub of a whole project as it plays under the picture: from
// 0 to the end of the programme as the export counts it (studio.Store.ProgrammeMs:
// the source audio or the last line's slot, whichever ends last; a take running past
// it is cut there, as in the export), each line's take at its timecode as the export
// places it, silence or the original where a line has none. It is assembled with the same code
// as RangeMix and cached under a key of what it is made of (the takes and their
// offsets, the fill, the length), so it is made once per content: a new take makes a
// new mix, playing the same again costs a lookup. A programme longer than the
// export limit is refused with an error that unwraps to studio.ErrInvalid.
func (l *Library) PreviewMix(ctx context.Context, projectID int64, opts PreviewOpts) (*studio.Blob, error) {
	lines, err := l.store.AllLines(ctx, projectID)
	if err != nil {
		return nil, err
	}
	endMs, err := l.store.ProgrammeMs(ctx, projectID)
	if err != nil {
		return nil, err
	}
	var src *studio.ProjectSource
	switch s, err := l.store.ProjectSource(ctx, projectID); {
	case err == nil:
		src = s
	case !errors.Is(err, studio.ErrNotFound):
		return nil, err
	}
	pick := func(ln studio.Line) *int64 {
		if opts.Approved {
			return ln.ApprovedTakeID
		}
		return ln.CurrentTakeID
	}
	var ids []int64
	for _, ln := range lines {
		if id := pick(ln); id != nil {
			ids = append(ids, *id)
		}
	}
	takes, err := l.store.TakesByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	if most := l.store.Limits.ExportMs(); endMs > most {
		return nil, i18n.Errorf(studio.ErrInvalid, "preview.too_long", seconds(msDuration(endMs)), seconds(msDuration(most)))
	}
	const rate = audio.DefaultSampleRate
	channels := 1
	if opts.FillOriginal && src != nil {
		channels = src.Channels // the original's segments keep their channels
	}
	var bed *studio.ProjectBed
	if opts.Bed {
		switch b, err := l.store.ProjectBed(ctx, projectID); {
		case err == nil:
			bed = b
			channels = max(channels, b.Channels) // a stereo bed keeps its image
		case !errors.Is(err, studio.ErrNotFound):
			return nil, err
		}
	}
	samples := max(audio.SamplesFor(endMs, rate), 1)
	key := []string{"preview", strconv.Itoa(rate), strconv.Itoa(channels), strconv.FormatInt(samples, 10)}
	var clips []audio.Clip
	for _, ln := range lines {
		sha := ""
		if id := pick(ln); id != nil {
			if t, ok := takes[*id]; ok {
				sha = t.AudioSHA256
			}
		}
		if sha == "" && opts.FillOriginal && src != nil && ln.EndMs > ln.StartMs && ln.StartMs < src.DurationMs {
			seg, err := l.SourceSegment(ctx, projectID, ln.StartMs, ln.EndMs)
			if err != nil {
				return nil, err
			}
			sha = seg.SHA256
		}
		if sha == "" {
			continue
		}
		path, err := l.blobs.Path(sha)
		if err != nil {
			return nil, err
		}
		off := audio.SamplesFor(ln.StartMs, rate)
		clips = append(clips, audio.Clip{Path: path, Offset: off})
		key = append(key, sha+"@"+strconv.FormatInt(off, 10))
	}
	blob, err := l.store.DerivedAudio(ctx, l.blobs, derivedKey("preview", key...),
		func(ctx context.Context, out string) (studio.Blob, error) {
			_, err := audio.Assemble(ctx, audio.AssembleParams{OutputPath: out, SampleRate: rate, Channels: channels, Samples: samples, Clips: clips})
			return studio.Blob{Format: audio.FormatWAV, DurationMs: int(samples * 1000 / rate), SampleRate: rate, Channels: channels}, err
		})
	if err != nil {
		return nil, fmt.Errorf("error assembling the preview of project %d: %w", projectID, err)
	}
	if bed == nil {
		return blob, nil
	}
	return l.previewOverBed(ctx, bed, blob, channels, samples)
}

// previewOverBed mixes the dub of the preview over the bed, ducked as the export's
// mix over the bed is, cached under the two blobs' hashes: a new bed or a new take
// is a new mix.
func (l *Library) previewOverBed(ctx context.Context, bed *studio.ProjectBed, dub *studio.Blob, channels int, samples int64) (*studio.Blob, error) {
	const rate = audio.DefaultSampleRate
	stem, err := l.BedStem(ctx, bed, channels, samples)
	if err != nil {
		return nil, err
	}
	dubPath, err := l.blobs.Path(dub.SHA256)
	if err != nil {
		return nil, err
	}
	bedPath, err := l.blobs.Path(stem.SHA256)
	if err != nil {
		return nil, err
	}
	// The ducking is the export's (Library.Duck); its settings are in the key, so a
	// new setting is a new mix.
	d := l.Duck.WithDefaults()
	duck := fmt.Sprintf("duck:%g:%g:%g:%g", d.ThresholdDB, d.Ratio, d.AttackMs, d.ReleaseMs)
	key := derivedKey("preview-bed", duck, dub.SHA256, stem.SHA256, strconv.Itoa(channels), strconv.FormatInt(samples, 10))
	blob, err := l.store.DerivedAudio(ctx, l.blobs, key, func(ctx context.Context, out string) (studio.Blob, error) {
		_, err := audio.MixOverBed(ctx, audio.BedMixParams{DialoguePath: dubPath, BedPath: bedPath, OutputPath: out,
			SampleRate: rate, Channels: channels, Samples: samples, Duck: d})
		return studio.Blob{Format: audio.FormatWAV, DurationMs: int(samples * 1000 / rate), SampleRate: rate, Channels: channels}, err
	})
	if err != nil {
		return nil, fmt.Errorf("error mixing the preview of project %d over its bed: %w", bed.ProjectID, err)
	}
	return blob, nil
}

// ProxyPicture returns the picture of the proxy blob proxySHA without its sound
// track (audio.PictureOnly), as the picture plays under the dub: cached in the
// derived audio cache under the proxy's hash, so it is made once per proxy (a copy of
// the stream, about a second for an hour of proxy).
func (l *Library) ProxyPicture(ctx context.Context, proxySHA string) (*studio.Blob, error) {
	proxy, err := l.store.Blob(ctx, proxySHA)
	if err != nil {
		return nil, err
	}
	in, err := l.blobs.Path(proxySHA)
	if err != nil {
		return nil, err
	}
	blob, err := l.store.DerivedAudio(ctx, l.blobs, "picture:"+proxySHA, func(ctx context.Context, out string) (studio.Blob, error) {
		return studio.Blob{Format: "mp4", DurationMs: proxy.DurationMs}, audio.PictureOnly(ctx, in, out)
	})
	if err != nil {
		return nil, fmt.Errorf("error copying the picture of proxy %s: %w", proxySHA[:min(12, len(proxySHA))], err)
	}
	return blob, nil
}

func msDuration(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
