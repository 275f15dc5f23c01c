package web

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/studio/script"
	"dubstudio/views"
)

// Exporter queues export jobs (the workflow pipeline).
type Exporter interface {
	Export(ctx context.Context, projectID, userID int64, opts studio.ExportOptions) (*studio.Export, error)
}

func (s *Server) showExports(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	exports, err := s.store.Exports(c.Request().Context(), p.ID)
	if err != nil {
		return err
	}
	if isHTMX(c) {
		return s.render(c, http.StatusOK, views.ExportList(s.page(c, p.Name, "projects"), *p, exports))
	}
	fps, _, err := s.projectFPS(c.Request().Context(), p.ID, "")
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.ExportsPage(s.page(c, p.Name, "projects"), *p, exports, fps))
}

func (s *Server) startExport(c echo.Context) error {
	if s.exporter == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable)
	}
	p, err := s.project(c)
	if err != nil {
		return err
	}
	opts, err := exportOptions(c)
	if err != nil {
		return err
	}
	if _, err := s.exporter.Export(c.Request().Context(), p.ID, currentUser(c).ID, opts); err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/projects/"+strconv.FormatInt(p.ID, 10)+"/exports")
	}
	return s.showExports(c)
}

// exportOptions reads the export form (docs/exports.md); a field left out is its
// default, so a form without the options exports as before.
func exportOptions(c echo.Context) (studio.ExportOptions, error) {
	o := studio.ExportOptions{
		ApprovedOnly:  c.FormValue("takes") != "done",
		IncludeStale:  c.FormValue("include_stale") != "",
		Stereo:        c.FormValue("channels") == "stereo",
		SpeakerNames:  c.FormValue("speaker_names") != "",
		BedMix:        c.FormValue("bed_mix") != "",
		StartTimecode: c.FormValue("start_timecode"),
		FPS:           script.FPS(strings.TrimSpace(c.FormValue("fps"))),
	}
	if v := strings.TrimSpace(c.FormValue("bit_depth")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return o, i18n.Errorf(studio.ErrInvalid, "export.bad_bit_depth", v)
		}
		o.BitDepth = n
	}
	return o, o.Normalize()
}

// downloadExport sends a finished archive, named after the project. The file path
// comes from the export's ID, never from the request.
func (s *Server) downloadExport(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	eid, err := paramID(c, "eid")
	if err != nil {
		return err
	}
	ex, err := s.store.Export(c.Request().Context(), p.ID, eid)
	if err != nil {
		return err
	}
	if ex.State != studio.ExportDone {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	path := filepath.Join(s.cfg.DataDir, "exports", "export-"+strconv.FormatInt(ex.ID, 10)+".zip")
	if _, err := os.Stat(path); err != nil {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	setAttachment(c, downloadName(p.Name)+"-export-"+strconv.FormatInt(ex.ID, 10)+".zip")
	return c.File(path)
}

// downloadName makes a project's name a file name, keeping every letter, digit and
// mark of any script: only what file systems refuse (path separators, control
// characters, the characters Windows reserves) becomes '_'.
func downloadName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`/\:*?"<>|`, r) {
			r = '_'
		}
		b.WriteRune(r)
	}
	out := []rune(strings.Trim(b.String(), " ."))
	if len(out) > 120 {
		out = out[:120]
	}
	if len(out) == 0 {
		return "project"
	}
	return string(out)
}

// setAttachment names a download (RFC 6266): filename* carries the name in UTF-8, and
// filename an ASCII stand-in for clients that do not read filename*.
func setAttachment(c echo.Context, name string) {
	var ascii, ext strings.Builder
	for _, r := range name {
		if r >= 0x20 && r < 0x7f && r != '"' && r != '\\' {
			ascii.WriteRune(r)
		} else {
			ascii.WriteByte('_')
		}
	}
	for _, b := range []byte(name) {
		// attr-char of RFC 8187; every other byte is percent-encoded.
		if 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("!#$&+-.^_`|~", b) >= 0 {
			ext.WriteByte(b)
		} else {
			fmt.Fprintf(&ext, "%%%02X", b)
		}
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, ascii.String(), ext.String()))
}
