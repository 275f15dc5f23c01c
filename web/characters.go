package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"dubstudio/audio"
	"dubstudio/i18n"
	"dubstudio/internal/perm"
	"dubstudio/media"
	"dubstudio/studio"
	"dubstudio/views"
)

func characterForm(ch studio.Character) views.CharacterForm {
	f := views.CharacterForm{Character: ch, Name: ch.Name, Color: ch.Color, PreviewVoice: ch.PreviewVoice,
		EmotionMode: string(ch.Emotion.Mode), Errors: map[string]string{}}
	switch ch.Emotion.Mode {
	case studio.EmotionText:
		f.EmotionValue = ch.Emotion.Text
	case studio.EmotionVector:
		f.EmotionValue = views.FormatVector(ch.Emotion.Vector)
	case studio.EmotionAudio:
		f.EmotionWeight = strconv.FormatFloat(ch.Emotion.Weight, 'f', -1, 64)
	}
	return f
}

func (s *Server) listCharacters(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	chars, err := s.store.Characters(c.Request().Context(), p.ID)
	if err != nil {
		return err
	}
	forms := make([]views.CharacterForm, len(chars))
	for i, ch := range chars {
		forms[i] = characterForm(ch)
	}
	voice, err := s.newCharacterVoice(c.Request().Context(), p.ID)
	if err != nil {
		return err
	}
	newForm := views.CharacterForm{Color: studio.Palette[len(chars)%len(studio.Palette)], PreviewVoice: voice, EmotionMode: "speaker"}
	return s.render(c, http.StatusOK, views.CharactersPage(s.page(c, p.Name, "projects"), *p, forms, newForm))
}

// characterParams reads the character form, keeping what was typed in f.
func (s *Server) characterParams(c echo.Context, f *views.CharacterForm, current studio.Emotion) (studio.CharacterParams, bool) {
	f.Name, f.Color, f.PreviewVoice = c.FormValue("name"), c.FormValue("color"), c.FormValue("preview_voice")
	f.EmotionMode, f.EmotionValue, f.EmotionWeight = c.FormValue("emotion_mode"), c.FormValue("emotion_value"), c.FormValue("emotion_weight")
	if f.Errors == nil {
		f.Errors = map[string]string{}
	}
	p := studio.CharacterParams{Name: f.Name, Color: f.Color, PreviewVoice: f.PreviewVoice}
	switch studio.EmotionMode(f.EmotionMode) {
	case studio.EmotionAudio:
		w, err := strconv.ParseFloat(f.EmotionWeight, 64)
		if err != nil {
			w = -1
		}
		// The emotion reference is the character's current one; uploading it is a
		// separate step.
		p.Emotion = studio.Emotion{Mode: studio.EmotionAudio, Weight: w, AudioSHA256: current.AudioSHA256,
			SourceStartMs: current.SourceStartMs, SourceEndMs: current.SourceEndMs}
	default:
		e, err := parseEmotion(f.EmotionMode, f.EmotionValue)
		if err != nil {
			f.Errors["emotion"] = s.messageOf(c, 422, err)
			return p, false
		}
		if e != nil {
			p.Emotion = *e
		}
	}
	return p, true
}

func (s *Server) fieldErrors(c echo.Context, err error, into map[string]string) bool {
	var fe studio.FieldsError
	if !errors.As(err, &fe) {
		return false
	}
	for k, v := range fe {
		into[k] = v.In(langOf(c))
	}
	return true
}

func (s *Server) createCharacter(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	f := views.CharacterForm{}
	params, ok := s.characterParams(c, &f, studio.Emotion{})
	if ok {
		var ch *studio.Character
		ch, err = s.store.CreateCharacter(c.Request().Context(), p.ID, params)
		if err == nil {
			_ = ch
			c.Response().Header().Set(hxRedirect, "/projects/"+c.Param("pid")+"/characters")
			return c.NoContent(http.StatusCreated)
		}
		if !s.fieldErrors(c, err, f.Errors) {
			return err
		}
	}
	return s.render(c, http.StatusUnprocessableEntity, views.NewCharacterForm(s.page(c, "", ""), p.ID, f))
}

func (s *Server) character(c echo.Context) (*studio.Character, error) {
	pid, err := paramID(c, "pid")
	if err != nil {
		return nil, err
	}
	cid, err := paramID(c, "cid")
	if err != nil {
		return nil, err
	}
	return s.store.Character(c.Request().Context(), pid, cid)
}

func (s *Server) saveCharacter(c echo.Context) error {
	ch, err := s.character(c)
	if err != nil {
		return err
	}
	f := characterForm(*ch)
	params, ok := s.characterParams(c, &f, ch.Emotion)
	if ok {
		err = s.store.UpdateCharacter(c.Request().Context(), ch.ProjectID, ch.ID, params)
		if err == nil {
			ch, err = s.store.Character(c.Request().Context(), ch.ProjectID, ch.ID)
			if err != nil {
				return err
			}
			f = characterForm(*ch)
			f.Saved = true
			return s.render(c, http.StatusOK, views.CharacterCard(s.page(c, "", ""), ch.ProjectID, f))
		}
		if !s.fieldErrors(c, err, f.Errors) {
			return err
		}
	}
	return s.render(c, http.StatusUnprocessableEntity, views.CharacterCard(s.page(c, "", ""), ch.ProjectID, f))
}

// uploadReference stores a character's reference voice.
func (s *Server) uploadReference(c echo.Context) error {
	return s.uploadCharacterAudio(c, "file", nil, func(ctx context.Context, ch *studio.Character, up media.Upload) error {
		return s.media.SetCharacterReference(ctx, ch.ProjectID, ch.ID, up)
	})
}

// defaultEmotionWeight is the emotion upload form's weight, taken when a request
// sends none.
const defaultEmotionWeight = 0.8

// uploadEmotionAudio stores a character's emotion reference recording. Its weight is
// checked before the recording is spooled, probed and stored, so that a wrong one
// keeps nothing.
func (s *Server) uploadEmotionAudio(c echo.Context) error {
	weight, err := emotionUploadWeight(c)
	return s.uploadCharacterAudio(c, "emotion_file", err, func(ctx context.Context, ch *studio.Character, up media.Upload) error {
		return s.media.SetCharacterEmotionAudio(ctx, ch.ProjectID, ch.ID, up, weight)
	})
}

// emotionUploadWeight reads the emotion upload's weight: the form's default when the
// request sends none, else a number from 0 to 1 (the range of studio.Emotion.Validate,
// which the store checks again; NaN is in none), refused with the character form's
// message.
func emotionUploadWeight(c echo.Context) (float64, error) {
	v := c.FormValue("emotion_weight") // parses the form, which Has then reads
	if !c.Request().Form.Has("emotion_weight") {
		return defaultEmotionWeight, nil
	}
	w, err := strconv.ParseFloat(v, 64)
	if err != nil || !(w >= 0 && w <= 1) {
		return 0, i18n.Errorf(studio.ErrInvalid, "emotion.bad_weight")
	}
	return w, nil
}

// uploadCharacterAudio takes an audio upload for a character: size-limited, spooled
// to a private temporary file and handed to set. formErr, a mistake in the form's
// other fields, refuses the file before it is spooled. A refusal is shown in the
// character's card, next to the file's field.
func (s *Server) uploadCharacterAudio(c echo.Context, field string, formErr error, set func(ctx context.Context, ch *studio.Character, up media.Upload) error) error {
	ch, err := s.character(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var up media.Upload
	err = formErr
	if err == nil {
		up, err = s.spoolUpload(c, field)
	}
	if err == nil {
		defer os.Remove(up.Path)
		err = set(ctx, ch, up)
	}
	if err != nil {
		status, msg, ok := s.refusal(c, err)
		if !ok {
			return err
		}
		f := characterForm(*ch)
		f.Errors[field] = msg
		return s.render(c, status, views.CharacterCard(s.page(c, "", ""), ch.ProjectID, f))
	}
	ch, err = s.store.Character(ctx, ch.ProjectID, ch.ID)
	if err != nil {
		return err
	}
	f := characterForm(*ch)
	f.Saved = true
	return s.render(c, http.StatusOK, views.CharacterCard(s.page(c, "", ""), ch.ProjectID, f))
}

// spoolUpload copies the multipart file field to a temporary file under the data
// directory, refusing it with 413 past the upload limit.
func (s *Server) spoolUpload(c echo.Context, field string) (media.Upload, error) {
	limit := s.cfg.MaxUploadBytes
	c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, limit+1<<20)
	fh, err := c.FormFile(field)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return media.Upload{}, echo.NewHTTPError(http.StatusRequestEntityTooLarge, s.t(c, "error.too_large", limit>>20))
		}
		return media.Upload{}, echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "upload.no_file"))
	}
	if fh.Size > limit {
		return media.Upload{}, echo.NewHTTPError(http.StatusRequestEntityTooLarge, s.t(c, "error.too_large", limit>>20))
	}
	src, err := fh.Open()
	if err != nil {
		return media.Upload{}, err
	}
	defer src.Close()
	return s.spoolTo(c, src, fh.Filename, "upload-*", limit)
}

// spoolTo copies src into a private temporary file under the data directory, refusing
// it with 413 past limit bytes (nothing is kept then). The upload's name is the
// client's file name reduced to a display name, never used as a path.
func (s *Server) spoolTo(c echo.Context, src io.Reader, filename, pattern string, limit int64) (media.Upload, error) {
	tooLarge := echo.NewHTTPError(http.StatusRequestEntityTooLarge, s.t(c, "error.too_large", limit>>20))
	if !validText(map[string][]string{"filename": {filename}}) {
		// The name is kept and shown: Postgres would refuse it after the upload.
		return media.Upload{}, echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_text"))
	}
	dir := filepath.Join(s.cfg.DataDir, "tmp")
	if err := os.MkdirAll(dir, perm.Dir); err != nil {
		return media.Upload{}, err
	}
	dst, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return media.Upload{}, err
	}
	n, err := io.Copy(dst, io.LimitReader(src, limit+1))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil || n > limit {
		os.Remove(dst.Name())
		var mbe *http.MaxBytesError
		if n > limit || errors.As(err, &mbe) {
			return media.Upload{}, tooLarge
		}
		return media.Upload{}, err
	}
	name := path.Base(strings.ReplaceAll(filename, "\\", "/"))
	if len(name) > 200 {
		name = name[:200]
	}
	return media.Upload{Path: dst.Name(), Name: name}, nil
}

func (s *Server) deleteCharacter(c echo.Context) error {
	ch, err := s.character(c)
	if err != nil {
		return err
	}
	if err := s.store.DeleteCharacter(c.Request().Context(), ch.ProjectID, ch.ID); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// serveBlob streams a stored audio file. The name must be a hex SHA-256 the store
// knows, so no user input becomes a path.
func (s *Server) serveBlob(c echo.Context) error {
	sum := c.Param("sha")
	p, err := s.blobs.Path(sum)
	if err != nil {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	if err := s.mayHearBlob(c, sum); err != nil {
		return err
	}
	b, err := s.store.Blob(c.Request().Context(), sum)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "private, max-age=31536000, immutable")
	c.Response().Header().Set("Content-Type", mimeOf(b.Format))
	return c.File(p)
}

func mimeOf(format string) string {
	switch format {
	case audio.FormatWAV:
		return "audio/wav"
	case audio.FormatMP3:
		return "audio/mpeg"
	case audio.FormatFLAC:
		return "audio/flac"
	case audio.FormatOGG:
		return "audio/ogg"
	}
	return "application/octet-stream"
}
