package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/studio/script"
	"dubstudio/views"
)

// importScript previews an import (preview=1) or does it. A preview runs the whole
// import in a transaction that is rolled back (studio.ImportOpts.DryRun) and keeps
// nothing: the confirm step uploads the file again, with the SHA-256 of the bytes
// previewed, and a file that changed in between is previewed again instead of
// imported. So nothing of an upload outlives its request, in memory or on disk.
func (s *Server) importScript(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	fh, err := c.FormFile("file")
	if err != nil {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, s.t(c, "import.no_file"))
	}
	if fh.Size > s.cfg.MaxScriptBytes {
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, s.t(c, "error.too_large", s.cfg.MaxScriptBytes>>20))
	}
	f, err := fh.Open()
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, s.cfg.MaxScriptBytes+1))
	if err != nil {
		return err
	}
	// The client's file name is only shown and used as a format hint, never as a path.
	name := path.Base(strings.ReplaceAll(fh.Filename, "\\", "/"))
	sum := sha256.Sum256(data)
	vm := views.ImportVM{ProjectID: p.ID, FileName: name, SHA256: hex.EncodeToString(sum[:]),
		Preview: c.FormValue("preview") == "1"}
	page := s.page(c, p.Name, "projects")
	refuse := func(status int) error { return s.render(c, status, views.ImportOutcome(page, vm)) }
	if want := c.FormValue("sha256"); !vm.Preview && want != "" && want != vm.SHA256 {
		// Not what was previewed: show what it is now.
		vm.Preview = true
		vm.Problems = []string{s.t(c, "import.changed")}
		return refuse(http.StatusConflict)
	}
	mode, ok := studio.ParseImportMode(c.FormValue("mode"))
	if !ok {
		vm.Problems = []string{s.t(c, "import.bad_mode")}
		return refuse(http.StatusUnprocessableEntity)
	}
	vm.Mode = mode
	fps, fpsFrom, err := s.projectFPS(c.Request().Context(), p.ID, c.FormValue("fps"))
	if err != nil {
		return err
	}

	res, err := script.Import(name, data, script.ImportOpts{Encoding: c.FormValue("encoding"), FPS: fps})
	cues := res.Cues
	vm.Encoding, vm.Format = res.Encoding, string(res.Format)
	if res.FPS != "" {
		vm.FPS, vm.FPSFrom = string(res.FPS), fpsFrom
	}
	var pe *script.ParseError
	if errors.As(err, &pe) {
		for _, pr := range pe.Problems {
			vm.Problems = append(vm.Problems, pr.In(langOf(c)))
		}
		return refuse(http.StatusUnprocessableEntity)
	}
	if err != nil {
		return err
	}
	if !vm.Preview && c.FormValue("sha256") != "" && c.FormValue("fps_previewed") != vm.FPS {
		// Frames counted at another rate than the preview showed (the select changed,
		// or the project's video did): show what it is now.
		vm.Preview = true
		vm.Problems = []string{s.t(c, "import.fps_changed")}
		return refuse(http.StatusConflict)
	}
	// Exact duplicates (same times and text as an earlier cue) are skipped.
	lines := make([]studio.NewLine, 0, len(cues))
	for _, cue := range cues {
		if slices.Contains(cue.Flags, script.FlagDuplicate) {
			vm.Duplicates++
			continue
		}
		lines = append(lines, studio.NewLine{SourceLine: cue.SourceLine, StartMs: int(cue.Start / time.Millisecond),
			EndMs: int(cue.End / time.Millisecond), CharacterName: cue.Character, Text: cue.Text, Emotion: cue.Emotion})
	}
	done, err := s.store.ImportScript(c.Request().Context(), currentUser(c).ID, p.ID, lines,
		studio.ImportOpts{Mode: mode, DryRun: vm.Preview})
	var ie *studio.ImportError
	if errors.As(err, &ie) {
		for _, pr := range ie.Problems {
			msg := pr.Err.In(langOf(c))
			if pr.Line > 0 {
				msg = s.t(c, "script.problem_at_line", pr.Line, msg)
			}
			vm.Problems = append(vm.Problems, msg)
		}
		return refuse(http.StatusUnprocessableEntity)
	}
	if err != nil {
		return err
	}
	vm.Result = done
	if vm.Preview {
		vm.Cues, vm.Rows, vm.FlagCounts = len(cues), previewRows(cues, done.Actions), flagCounts(cues)
		return s.render(c, http.StatusOK, views.ImportOutcome(page, vm))
	}
	if vm.Lines, err = s.projectVM(c, p); err != nil {
		return err
	}
	vm.Lines.OOB = true
	c.Response().Header().Set(hxTrigger, "progress-changed")
	return s.render(c, http.StatusOK, views.ImportOutcome(page, vm))
}

// projectFPS returns the frame rate timecodes with frames count at, in an import and
// as an export form's choice, and where it comes from (views.FPSFromForm,
// FPSFromVideo, FPSFromDefault): the one the form names, else the project's source
// video's as probed, when it is one of script.FrameRates, else script.DefaultFPS.
// An import's preview and confirm resolve it alike,
// and the confirm checks that it found what the preview did.
func (s *Server) projectFPS(ctx context.Context, projectID int64, chosen string) (script.FPS, string, error) {
	if chosen != "" {
		return script.FPS(chosen), views.FPSFromForm, nil
	}
	v, err := s.store.ProjectVideo(ctx, projectID)
	if err != nil && !errors.Is(err, studio.ErrNotFound) {
		return "", "", err
	}
	if err == nil && v.FrameRateNum != nil && v.FrameRateDen != nil {
		if fps, ok := script.FPSOf(*v.FrameRateNum, *v.FrameRateDen); ok {
			return fps, views.FPSFromVideo, nil
		}
	}
	return script.DefaultFPS, views.FPSFromDefault, nil
}

// previewRows lists the first views.MaxPreviewRows cues with what the import does
// with each; actions are those of the cues that are not duplicates within the file.
func previewRows(cues []script.Cue, actions []studio.ImportAction) []views.ImportRow {
	rows := make([]views.ImportRow, 0, min(len(cues), views.MaxPreviewRows))
	j := 0
	for _, cue := range cues {
		r := views.ImportRow{SourceLine: cue.SourceLine, Start: script.FormatTimecode(cue.Start), End: script.FormatTimecode(cue.End),
			SourceStart: cue.SourceStart, SourceEnd: cue.SourceEnd, Character: cue.Character, Text: cue.Text, Flags: cue.Flags, Action: views.ImportActionFileDuplicate}
		if !slices.Contains(cue.Flags, script.FlagDuplicate) {
			r.Action, r.Idx = actions[j].Kind, actions[j].Idx
			j++
		}
		if len(rows) < views.MaxPreviewRows {
			rows = append(rows, r)
		}
	}
	return rows
}

// flagCounts counts the cues per flag.
func flagCounts(cues []script.Cue) map[string]int {
	n := map[string]int{}
	for _, c := range cues {
		for _, f := range c.Flags {
			n[f]++
		}
	}
	return n
}

// scriptFormats are the formats a script downloads in, by their extension.
var scriptFormats = map[string]script.Format{
	"srt": script.FormatSRT, "vtt": script.FormatVTT, "ass": script.FormatASS, "csv": script.FormatCSV,
}

// exportScript downloads the project's script: /export.srt, .vtt, .ass and .csv, or
// /export?format=srt|vtt|ass|csv (the download form). SRT and WebVTT are subtitles as
// studios deliver them, without speaker names unless speakers is set ("NAME: " prefixes
// in SRT, <v NAME> spans in WebVTT); CSV and ASS always carry the characters, in their
// own column and in the Name field.
func (s *Server) exportScript(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	ext := c.QueryParam("format")
	if i := strings.LastIndexByte(c.Path(), '.'); i >= 0 {
		ext = c.Path()[i+1:]
	}
	if ext == "" {
		ext = "srt"
	}
	format, ok := scriptFormats[ext]
	if !ok {
		return echo.NewHTTPError(http.StatusBadRequest, s.t(c, "project.export_bad_format", ext))
	}
	speakers := c.QueryParam("speakers") != "" && c.QueryParam("speakers") != "0" || format == script.FormatCSV || format == script.FormatASS
	lines, err := s.store.AllLines(ctx, p.ID)
	if err != nil {
		return err
	}
	chars, err := s.store.Characters(ctx, p.ID)
	if err != nil {
		return err
	}
	names := map[int64]string{}
	for _, ch := range chars {
		names[ch.ID] = ch.Name
	}
	cues := make([]script.Cue, len(lines))
	for i, l := range lines {
		cues[i] = script.Cue{Start: time.Duration(l.StartMs) * time.Millisecond, End: time.Duration(l.EndMs) * time.Millisecond, Text: l.Text}
		if l.CharacterID != nil && speakers {
			cues[i].Character = names[*l.CharacterID]
		}
		if l.Emotion != nil {
			switch l.Emotion.Mode {
			case studio.EmotionText:
				cues[i].Emotion = l.Emotion.Text
			case studio.EmotionVector:
				cues[i].Emotion = views.FormatVector(l.Emotion.Vector)
			}
		}
	}
	var buf bytes.Buffer
	if err := script.Write(&buf, format, cues); err != nil {
		return err
	}
	setAttachment(c, downloadName(p.Name)+"."+string(format))
	return c.Blob(http.StatusOK, format.ContentType(), buf.Bytes())
}

func (s *Server) showProgress(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	counts, err := s.store.ProjectStateCounts(c.Request().Context(), []int64{p.ID})
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.Progress(s.page(c, "", ""), counts[p.ID]))
}
