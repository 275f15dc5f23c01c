package media

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"dubstudio/audio"
	"dubstudio/i18n"
	"dubstudio/studio"
)

// SetCharacterReference makes the uploaded recording the reference voice of a
// character. The file is probed by content (never trusted by name or extension),
// must be in a format accepted for references, and is moved into the blob store.
func (l *Library) SetCharacterReference(ctx context.Context, projectID, characterID int64, up Upload) error {
	info, err := l.checkReference(ctx, up)
	if err != nil {
		return err
	}
	// Measured before it is stored: the upload is moved into the blob store.
	check, err := CheckVoice(ctx, up.Path)
	if err != nil {
		return err
	}
	blob, err := l.storeReference(ctx, up, info)
	if err != nil {
		return err
	}
	return l.store.SetCheckedCharacterReference(ctx, projectID, characterID, blob.SHA256, up.Name, check.Warnings())
}

// SetCharacterEmotionAudio makes the uploaded recording the emotion reference of a
// character, with weight (from 0 to 1), checked and stored as a reference voice is.
func (l *Library) SetCharacterEmotionAudio(ctx context.Context, projectID, characterID int64, up Upload, weight float64) error {
	blob, err := l.putReference(ctx, up)
	if err != nil {
		return err
	}
	return l.store.SetCharacterEmotionAudio(ctx, projectID, characterID, blob.SHA256, weight)
}

// putReference probes an uploaded reference recording and moves it into the blob
// store as it is.
func (l *Library) putReference(ctx context.Context, up Upload) (*studio.Blob, error) {
	info, err := l.checkReference(ctx, up)
	if err != nil {
		return nil, err
	}
	return l.storeReference(ctx, up, info)
}

// storeReference moves a checked reference recording into the blob store.
func (l *Library) storeReference(ctx context.Context, up Upload, info audio.Info) (*studio.Blob, error) {
	return l.store.PutBlob(ctx, l.blobs, up.Path, studio.Blob{Format: info.Format,
		DurationMs: int(info.Duration.Milliseconds()), SampleRate: info.SampleRate, Channels: info.Channels})
}

// checkReference probes an uploaded reference recording: a format accepted for
// references, a length within the limits, and enough sound that is not silence.
func (l *Library) checkReference(ctx context.Context, up Upload) (audio.Info, error) {
	info, err := audio.ProbeReference(ctx, up.Path)
	if err != nil {
		return audio.Info{}, refused(err)
	}
	if err := l.Limits.checkReferenceLength(info.Duration); err != nil {
		return audio.Info{}, err
	}
	sound, err := soundDuration(ctx, up.Path, info.Duration)
	if err != nil {
		return audio.Info{}, err
	}
	if sound < referenceMinSoundMs*time.Millisecond {
		return audio.Info{}, i18n.Errorf(studio.ErrInvalid, "upload.reference_silent", seconds(sound), seconds(referenceMinSoundMs*time.Millisecond))
	}
	return info, nil
}

// SetProjectSource makes the uploaded audio or video file the original performance
// of a project, replacing any earlier one: its sound track is extracted with ffmpeg
// to a 48 kHz WAV (next to the upload, until it is stored) and kept as a blob. The
// upload itself is not kept, and its name is only shown. userID is who uploaded it.
func (l *Library) SetProjectSource(ctx context.Context, projectID, userID int64, up Upload) (*studio.ProjectSource, error) {
	return l.setProjectSource(ctx, projectID, userID, up, nil)
}

// setProjectSource is SetProjectSource with ffprobe's reading of the upload when the
// caller has one (nil: extractSound probes it).
func (l *Library) setProjectSource(ctx context.Context, projectID, userID int64, up Upload, reading *audio.ProbeResult) (*studio.ProjectSource, error) {
	blob, err := l.extractSound(ctx, up, reading)
	if err != nil {
		return nil, err
	}
	src := studio.ProjectSource{ProjectID: projectID, AudioSHA256: blob.SHA256, FileName: up.Name,
		DurationMs: blob.DurationMs, Channels: blob.Channels, UploadedBy: &userID}
	if err := l.store.SetProjectSource(ctx, src); err != nil {
		return nil, err
	}
	return &src, nil
}

// extractSound checks an uploaded audio or video file and keeps its sound track as a
// blob: a 48 kHz WAV of at most two channels, extracted by ffmpeg next to the
// upload. The length (SOURCE_MAX_SECONDS) and the free space the WAV needs
// (MIN_FREE_MB kept) are checked before anything is extracted, and a file that is
// not audio, or a video without a sound track, is refused before anything is
// written: a refusal changes nothing. A project's source and its bed share it.
// reading is ffprobe's reading of the upload when the caller has one (a video upload,
// read for its picture); nil: extractSound runs ffprobe.
func (l *Library) extractSound(ctx context.Context, up Upload, reading *audio.ProbeResult) (*studio.Blob, error) {
	wav := up.Path + ".wav"
	defer os.Remove(wav) // gone already once stored
	// The length and the free space are checked before anything is extracted: the
	// WAV grows with the length (48 kHz, 16 bits a sample), not with the upload.
	var err error
	if reading == nil {
		if reading, err = audio.ProbeFile(ctx, up.Path); err != nil {
			return nil, refused(fmt.Errorf("error reading %q: %w", up.Name, err))
		}
	}
	probed, err := reading.Audio(ctx)
	if err != nil {
		return nil, refused(fmt.Errorf("error reading %q: %w", up.Name, err))
	}
	lim := l.Limits.withDefaults()
	if most := time.Duration(lim.SourceMaxMs) * time.Millisecond; probed.Duration > most {
		return nil, i18n.Errorf(studio.ErrInvalid, "upload.source_too_long", seconds(probed.Duration), seconds(most))
	}
	free, err := freeBytes(filepath.Dir(up.Path))
	if err != nil {
		return nil, err
	}
	// ExtractAudio writes 16-bit samples at 48 kHz, at most two channels.
	need := int64(probed.Duration.Seconds()*audio.DefaultSampleRate) * 2 * int64(min(max(1, probed.Channels), 2))
	if free-need < lim.MinFreeBytes {
		return nil, i18n.Errorf(audio.ErrNoSpace, "upload.no_space", need>>20, free>>20, lim.MinFreeBytes>>20)
	}
	// As ExtractAudio, with the probe above: a file that is not audio, or a video
	// without a sound track, was refused by it before anything was written.
	if err := audio.Transcode(ctx, audio.TranscodeParams{InputPath: up.Path, OutputPath: wav, Probed: &probed}); err != nil {
		return nil, refused(fmt.Errorf("error extracting the sound track of %q: %w", up.Name, err))
	}
	info, err := audio.Probe(ctx, wav)
	if err != nil {
		return nil, fmt.Errorf("error probing the extracted sound track: %w", err)
	}
	return l.store.PutBlob(ctx, l.blobs, wav, studio.Blob{Format: audio.FormatWAV,
		DurationMs: int(info.Duration.Milliseconds()), SampleRate: info.SampleRate, Channels: info.Channels})
}

// DeleteProjectSource forgets a project's source audio. Its blob and the segments
// cut from it stay: takes or other projects may share them.
func (l *Library) DeleteProjectSource(ctx context.Context, projectID int64) error {
	return l.store.DeleteProjectSource(ctx, projectID)
}
