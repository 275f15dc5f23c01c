package media

import (
	"context"
	"fmt"
	"strconv"

	"dubstudio/audio"
	"dubstudio/studio"
)

// SetProjectBed makes the uploaded audio or video file the music-and-effects bed of
// a project (kind: an M&E track, or a full mix whose own dialogue is ducked under the
// dub), replacing any earlier one. It is checked and extracted exactly as a source is
// (extractSound: SOURCE_MAX_SECONDS, MIN_FREE_MB, the probe), so a refused file
// changes nothing; the upload itself is not kept. userID is who uploaded it.
func (l *Library) SetProjectBed(ctx context.Context, projectID, userID int64, kind studio.BedKind, up Upload) (*studio.ProjectBed, error) {
	if _, err := studio.ParseBedKind(string(kind)); err != nil {
		return nil, err
	}
	blob, err := l.extractSound(ctx, up, nil)
	if err != nil {
		return nil, err
	}
	bed := studio.ProjectBed{ProjectID: projectID, AudioSHA256: blob.SHA256, Kind: kind, FileName: up.Name,
		DurationMs: blob.DurationMs, Channels: min(max(blob.Channels, 1), 2), UploadedBy: &userID}
	if err := l.store.SetProjectBed(ctx, bed); err != nil {
		return nil, err
	}
	return &bed, nil
}

// DeleteProjectBed forgets a project's bed; its blob stays.
func (l *Library) DeleteProjectBed(ctx context.Context, projectID int64) error {
	return l.store.DeleteProjectBed(ctx, projectID)
}

// BedStem is a bed laid against a programme of samples frames at 48 kHz with
// channels (16-bit, no time reference): trimmed or padded to that length, cached in
// the derived audio under a key of the bed and the format, for the preview.
func (l *Library) BedStem(ctx context.Context, bed *studio.ProjectBed, channels int, samples int64) (*studio.Blob, error) {
	in, err := l.blobs.Path(bed.AudioSHA256)
	if err != nil {
		return nil, err
	}
	const rate = audio.DefaultSampleRate
	key := derivedKey("bed", bed.AudioSHA256, strconv.Itoa(rate), strconv.Itoa(channels), strconv.FormatInt(samples, 10))
	blob, err := l.store.DerivedAudio(ctx, l.blobs, key, func(ctx context.Context, out string) (studio.Blob, error) {
		err := audio.RenderBed(ctx, audio.BedParams{InputPath: in, OutputPath: out, SampleRate: rate, Channels: channels, Samples: samples})
		return studio.Blob{Format: audio.FormatWAV, DurationMs: int(samples * 1000 / rate), SampleRate: rate, Channels: channels}, err
	})
	if err != nil {
		return nil, fmt.Errorf("error laying the bed of project %d: %w", bed.ProjectID, err)
	}
	return blob, nil
}
