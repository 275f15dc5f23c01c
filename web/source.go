package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"dubstudio/audio"
	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/views"
)

// sourceVM is the source card of project p.
func (s *Server) sourceVM(c echo.Context, p *studio.Project) (views.SourceVM, error) {
	vm := views.SourceVM{Project: *p, LimitMB: s.cfg.SourceMaxUploadBytes >> 20}
	src, err := s.store.ProjectSource(c.Request().Context(), p.ID)
	switch {
	case err == nil:
		vm.Source = src
	case !errors.Is(err, studio.ErrNotFound):
		return vm, err
	}
	return vm, nil
}

// uploadSource takes a project's original performance: an audio or video file, size
// limited (SOURCE_MAX_UPLOAD_MB), spooled to a private temporary file, probed by
// content, its sound track extracted with ffmpeg to a 48 kHz WAV and stored as a
// content-addressed blob. The uploaded file itself is not kept, and its name is only
// shown.
func (s *Server) uploadSource(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.sourceVM(c, p)
	if err != nil {
		return err
	}
	fail := func(status int, msg string) error {
		vm.Error = msg
		return s.render(c, status, views.SourceCard(s.page(c, "", ""), vm))
	}
	userMsg := func(err error) (string, bool) {
		var ie *i18n.Error
		if errors.As(err, &ie) {
			return ie.In(langOf(c)), true
		}
		return "", false
	}
	tmp, name, err := s.spoolLargeUpload(c, "file", s.cfg.SourceMaxUploadBytes)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return fail(he.Code, s.messageOf(c, he.Code, err))
		}
		return err
	}
	defer os.Remove(tmp)
	ctx := c.Request().Context()
	if _, err := audio.Probe(ctx, tmp); err != nil {
		if msg, ok := userMsg(err); ok {
			return fail(http.StatusUnprocessableEntity, msg)
		}
		return err
	}
	wav := tmp + ".wav"
	defer os.Remove(wav)
	if err := audio.ExtractAudio(ctx, tmp, wav); err != nil {
		if msg, ok := userMsg(err); ok {
			return fail(http.StatusUnprocessableEntity, msg)
		}
		if errors.Is(err, audio.ErrNoSpace) {
			return fail(http.StatusInsufficientStorage, s.t(c, "audio.no_space"))
		}
		return fmt.Errorf("error extracting the sound track of %q: %w", name, err)
	}
	info, err := audio.Probe(ctx, wav)
	if err != nil {
		return fmt.Errorf("error probing the extracted sound track: %w", err)
	}
	blob, err := s.store.PutBlob(ctx, s.blobs, wav, studio.Blob{Format: audio.FormatWAV,
		DurationMs: int(info.Duration.Milliseconds()), SampleRate: info.SampleRate, Channels: info.Channels})
	if err != nil {
		return err
	}
	uid := currentUser(c).ID
	src := studio.ProjectSource{ProjectID: p.ID, AudioSHA256: blob.SHA256, FileName: name,
		DurationMs: blob.DurationMs, Channels: info.Channels, UploadedBy: &uid}
	if err := s.store.SetProjectSource(ctx, src); err != nil {
		return err
	}
	vm.Source, vm.Notice = &src, s.t(c, "source.saved")
	c.Response().Header().Set(hxTrigger, "review-refresh")
	return s.render(c, http.StatusOK, views.SourceCard(s.page(c, "", ""), vm))
}

// deleteSource forgets a project's source audio.
func (s *Server) deleteSource(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	if err := s.store.DeleteProjectSource(c.Request().Context(), p.ID); err != nil {
		return err
	}
	vm, err := s.sourceVM(c, p)
	if err != nil {
		return err
	}
	c.Response().Header().Set(hxTrigger, "review-refresh")
	return s.render(c, http.StatusOK, views.SourceCard(s.page(c, "", ""), vm))
}

// serveSourceSegment plays a line's original segment: the source audio between the
// line's start and end, cut once per timing and kept as a blob.
func (s *Server) serveSourceSegment(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	src, err := s.store.ProjectSource(ctx, l.ProjectID)
	if err != nil {
		return err
	}
	if l.DurationMs() <= 0 || l.StartMs >= src.DurationMs {
		return echo.NewHTTPError(http.StatusNotFound, s.t(c, "source.no_segment"))
	}
	blob, err := s.sourceSegment(ctx, src, l.StartMs, l.EndMs)
	if err != nil {
		return err
	}
	p, err := s.blobs.Path(blob.SHA256)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "private, max-age=3600")
	c.Response().Header().Set("Content-Type", "audio/wav")
	return c.File(p)
}

// sourceSegment returns the blob of src between startMs and endMs, cutting it once.
// The worker cuts the same segments (for emotion references) under the same key.
func (s *Server) sourceSegment(ctx context.Context, src *studio.ProjectSource, startMs, endMs int) (*studio.Blob, error) {
	in, err := s.blobs.Path(src.AudioSHA256)
	if err != nil {
		return nil, err
	}
	return s.store.DerivedAudio(ctx, s.blobs, studio.SourceSegmentKey(src.AudioSHA256, startMs, endMs),
		func(ctx context.Context, out string) (studio.Blob, error) {
			err := audio.Segment(ctx, in, time.Duration(startMs)*time.Millisecond, time.Duration(endMs)*time.Millisecond, out)
			return studio.Blob{Format: audio.FormatWAV, DurationMs: endMs - startMs, SampleRate: audio.DefaultSampleRate, Channels: src.Channels}, err
		})
}

// setSourceEmotion makes the line's original segment the emotion reference of the
// line (scope=line) or the default of its character (scope=character).
func (s *Server) setSourceEmotion(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	weight, err := strconv.ParseFloat(c.FormValue("weight"), 64)
	if err != nil {
		weight = -1 // refused by validation with its message
	}
	var notice string
	switch c.FormValue("scope") {
	case "character":
		if l.CharacterID == nil {
			return echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "error.bad_request"))
		}
		ch, cerr := s.store.Character(ctx, l.ProjectID, *l.CharacterID)
		if cerr != nil {
			return cerr
		}
		err = s.store.SetCharacterSourceEmotion(ctx, l.ProjectID, ch.ID, l.StartMs, l.EndMs, weight)
		notice = s.t(c, "source.used_character", ch.Name)
	default:
		base, perr := strconv.Atoi(c.FormValue("base_revision"))
		if perr != nil {
			return echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_request"))
		}
		_, err = s.store.SetLineSourceEmotion(ctx, currentUser(c).ID, l.ProjectID, l.ID, base, weight)
		notice = s.t(c, "source.used_line")
	}
	if err != nil {
		status := statusOf(err)
		if status >= 500 {
			return err
		}
		msg := s.messageOf(c, status, err)
		return s.reviewAfter(c, l.ProjectID, l.ID, status, func(vm *views.ReviewVM) { vm.Error = msg })
	}
	return s.reviewAfter(c, l.ProjectID, l.ID, http.StatusOK, func(vm *views.ReviewVM) { vm.Notice = notice })
}

// parseSourceEmotion reads the line editor's "source:START-END:WEIGHT" emotion choice,
// which keeps a line's original-performance emotion when its other fields are saved.
func parseSourceEmotion(v string) (*studio.Emotion, error) {
	parts := strings.Split(strings.TrimPrefix(v, "source:"), ":")
	if len(parts) == 2 {
		start, end, ok := strings.Cut(parts[0], "-")
		a, err1 := strconv.Atoi(start)
		b, err2 := strconv.Atoi(end)
		w, err3 := strconv.ParseFloat(parts[1], 64)
		if ok && err1 == nil && err2 == nil && err3 == nil {
			e := studio.SourceEmotion(a, b, w)
			return &e, e.Validate()
		}
	}
	e := &studio.Emotion{Mode: studio.EmotionAudio}
	return nil, e.Validate()
}

// spoolLargeUpload streams the multipart file field to a temporary file under the data
// directory without holding it in memory or in a second temporary file (a source video
// can be gigabytes), refusing it with 413 past limit. It returns the temporary path
// and the client's file name reduced to a display name, never used as a path.
func (s *Server) spoolLargeUpload(c echo.Context, field string, limit int64) (string, string, error) {
	tooLarge := echo.NewHTTPError(http.StatusRequestEntityTooLarge, s.t(c, "error.too_large", limit>>20))
	noFile := echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "upload.no_file"))
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, limit+1<<20)
	var src io.Reader
	var filename string
	if r.MultipartForm != nil {
		// Already parsed (a form that sent its CSRF token as a field).
		fh, err := c.FormFile(field)
		if err != nil {
			return "", "", noFile
		}
		f, err := fh.Open()
		if err != nil {
			return "", "", err
		}
		defer f.Close()
		src, filename = f, fh.Filename
	} else {
		mr, err := r.MultipartReader()
		if err != nil {
			return "", "", noFile
		}
		for {
			part, err := mr.NextPart()
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				return "", "", tooLarge
			case err != nil:
				return "", "", noFile
			}
			if part.FormName() == field && part.FileName() != "" {
				src, filename = part, part.FileName()
				break
			}
		}
	}
	return s.spoolTo(c, src, filename, "source-*", limit)
}
