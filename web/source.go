package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"dubstudio/media"
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

// Media is what the handlers need of the studio's audio files: storing uploads,
// cutting source segments and mixing ranges (a *media.Library).
type Media interface {
	SetCharacterReference(ctx context.Context, projectID, characterID int64, up media.Upload) error
	SetCharacterEmotionAudio(ctx context.Context, projectID, characterID int64, up media.Upload, weight float64) error
	SetProjectSourceVideo(ctx context.Context, projectID, userID int64, up media.Upload) (*studio.ProjectSource, *studio.ProjectVideo, error)
	PreviewMix(ctx context.Context, projectID int64, opts media.PreviewOpts) (*studio.Blob, error)
	ProxyPicture(ctx context.Context, proxySHA string) (*studio.Blob, error)
	DeleteProjectSource(ctx context.Context, projectID int64) error
	SetProjectBed(ctx context.Context, projectID, userID int64, kind studio.BedKind, up media.Upload) (*studio.ProjectBed, error)
	DeleteProjectBed(ctx context.Context, projectID int64) error
	SourceSegment(ctx context.Context, projectID int64, startMs, endMs int) (*studio.Blob, error)
	RangeMix(ctx context.Context, projectID int64, lineIDs []int64) (*media.RangeMix, error)
	SpeechBounds(t studio.Take) (startMs, endMs int)
	TakePeaks(sha string) ([]byte, error)
}

// uploadSource takes a project's original performance: an audio or video file, size
// limited (SOURCE_MAX_UPLOAD_MB) and spooled to a private temporary file, whose sound
// track media keeps. A refused file is shown in the source card.
func (s *Server) uploadSource(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.sourceVM(c, p)
	if err != nil {
		return err
	}
	up, err := s.spoolLargeUpload(c, "file", s.cfg.SourceMaxUploadBytes)
	var src *studio.ProjectSource
	if err == nil {
		defer os.Remove(up.Path)
		var video *studio.ProjectVideo
		src, video, err = s.media.SetProjectSourceVideo(c.Request().Context(), p.ID, currentUser(c).ID, up)
		if err == nil {
			err = s.recordVideo(c.Request().Context(), p.ID, video)
		}
	}
	if err != nil {
		status, msg, ok := s.refusal(c, err)
		if !ok {
			return err
		}
		vm.Error = msg
		return s.render(c, status, views.SourceCard(s.page(c, "", ""), vm))
	}
	vm.Source, vm.Notice = src, s.t(c, "source.saved")
	c.Response().Header().Set(hxTrigger, "review-refresh, picture-refresh")
	return s.render(c, http.StatusOK, views.SourceCard(s.page(c, "", ""), vm))
}

// deleteSource forgets a project's source audio.
func (s *Server) deleteSource(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	if err := s.media.DeleteProjectSource(c.Request().Context(), p.ID); err != nil {
		return err
	}
	if err := s.store.DeleteProjectVideo(c.Request().Context(), p.ID); err != nil {
		return err
	}
	vm, err := s.sourceVM(c, p)
	if err != nil {
		return err
	}
	c.Response().Header().Set(hxTrigger, "review-refresh, picture-refresh")
	return s.render(c, http.StatusOK, views.SourceCard(s.page(c, "", ""), vm))
}

// serveSourceSegment plays a line's original segment: the source audio between the
// line's start and end, cut once per timing and kept as a blob.
func (s *Server) serveSourceSegment(c echo.Context) error {
	l, err := s.line(c)
	if err != nil {
		return err
	}
	blob, err := s.media.SourceSegment(c.Request().Context(), l.ProjectID, l.StartMs, l.EndMs)
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
		status, msg, ok := s.refusal(c, err)
		if !ok {
			return err
		}
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
// can be gigabytes), refusing it with 413 past limit.
func (s *Server) spoolLargeUpload(c echo.Context, field string, limit int64) (media.Upload, error) {
	up, _, err := s.spoolLargeUploadFields(c, field, limit)
	return up, err
}

// The short fields a large upload sends before its file are kept in memory, and the
// body may be gigabytes long: their number and their size (names and values) are
// bounded, 200,000 fields having held 222 MiB. The forms send one or two.
const (
	maxUploadFields     = 32
	maxUploadFieldBytes = 16 << 10
)

// spoolLargeUploadFields is spoolLargeUpload that also returns the form's short
// fields sent before the file (at most 1 KiB each, maxUploadFields of them and
// maxUploadFieldBytes in all, else 400; a field after the file is not read), such as
// the bed's kind.
func (s *Server) spoolLargeUploadFields(c echo.Context, field string, limit int64) (media.Upload, url.Values, error) {
	fields := url.Values{}
	tooLarge := echo.NewHTTPError(http.StatusRequestEntityTooLarge, s.t(c, "error.too_large", limit>>20))
	noFile := echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "upload.no_file"))
	tooManyFields := echo.NewHTTPError(http.StatusBadRequest, s.t(c, "upload.too_many_fields", maxUploadFields, maxUploadFieldBytes>>10))
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, limit+1<<20)
	var src io.Reader
	var filename string
	if r.MultipartForm != nil {
		// Already parsed (a form that sent its CSRF token as a field).
		for k, v := range r.MultipartForm.Value {
			fields[k] = v
		}
		fh, err := c.FormFile(field)
		if err != nil {
			return media.Upload{}, fields, noFile
		}
		f, err := fh.Open()
		if err != nil {
			return media.Upload{}, fields, err
		}
		defer f.Close()
		src, filename = f, fh.Filename
	} else {
		mr, err := r.MultipartReader()
		if err != nil {
			return media.Upload{}, fields, noFile
		}
		parts, size := 0, 0
		for {
			part, err := mr.NextPart()
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				return media.Upload{}, fields, tooLarge
			case err != nil:
				return media.Upload{}, fields, noFile
			}
			if part.FormName() == field && part.FileName() != "" {
				src, filename = part, part.FileName()
				break
			}
			// Every part before the file counts, kept or not.
			if parts++; parts > maxUploadFields {
				return media.Upload{}, fields, tooManyFields
			}
			if part.FileName() == "" && part.FormName() != "" {
				if v, err := io.ReadAll(io.LimitReader(part, 1<<10)); err == nil {
					if size += len(part.FormName()) + len(v); size > maxUploadFieldBytes {
						return media.Upload{}, fields, tooManyFields
					}
					fields.Add(part.FormName(), string(v))
				}
			}
		}
	}
	up, err := s.spoolTo(c, src, filename, "source-*", limit)
	return up, fields, err
}
