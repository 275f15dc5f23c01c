package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"dubstudio/media"
	"dubstudio/studio"
	"dubstudio/views"
)

// Proxies record a project's source video and queue the job that makes its
// browser-ready proxy (the workflow pipeline).
type Proxies interface {
	QueueProxy(ctx context.Context, v studio.ProjectVideo) (*studio.ProjectVideo, error)
}

// videoRoutes are the picture's: its card (polled while the proxy is made), the
// proxy and the dub preview, for editors of the project like its other audio.
func (s *Server) videoRoutes(editor *echo.Group) {
	editor.GET("/projects/:pid/video", s.showPicture)
	editor.GET("/projects/:pid/video/proxy.mp4", s.serveProxy)
	editor.GET("/projects/:pid/video/picture.mp4", s.serveProxyPicture)
	editor.GET("/projects/:pid/preview.wav", s.servePreview)
}

// recordVideo records the picture of a new source (nil: the source is audio only,
// or the server makes no proxies), replacing or forgetting the project's earlier one.
func (s *Server) recordVideo(ctx context.Context, projectID int64, v *studio.ProjectVideo) error {
	if v == nil || s.proxies == nil {
		return s.store.DeleteProjectVideo(ctx, projectID)
	}
	_, err := s.proxies.QueueProxy(ctx, *v)
	return err
}

// pictureVM is the picture card of project p.
func (s *Server) pictureVM(c echo.Context, p *studio.Project) (views.PictureVM, error) {
	vm := views.PictureVM{Project: *p}
	v, err := s.store.ProjectVideo(c.Request().Context(), p.ID)
	switch {
	case err == nil:
		vm.Video = v
	case !errors.Is(err, studio.ErrNotFound):
		return vm, err
	}
	switch b, err := s.store.ProjectBed(c.Request().Context(), p.ID); {
	case err == nil:
		vm.Bed = b
	case !errors.Is(err, studio.ErrNotFound):
		return vm, err
	}
	return vm, nil
}

// showPicture renders the picture card: the proxy's progress while it is made, then
// the player.
func (s *Server) showPicture(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm, err := s.pictureVM(c, p)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.Picture(s.page(c, "", ""), vm))
}

// serveProxy sends the project's video proxy with range requests (206 and
// Content-Range, as a video element seeking asks), by http.ServeContent.
func (s *Server) serveProxy(c echo.Context) error {
	sha, err := s.readyProxy(c)
	if err != nil {
		return err
	}
	// The URL names the proxy (?v=), so a new upload is a new URL.
	return s.serveBlobRange(c, sha, "video/mp4", "private, max-age=3600")
}

// readyProxy is the hash of the project's finished video proxy; 404 while there is none.
func (s *Server) readyProxy(c echo.Context) (string, error) {
	p, err := s.project(c)
	if err != nil {
		return "", err
	}
	v, err := s.store.ProjectVideo(c.Request().Context(), p.ID)
	if err != nil {
		return "", err
	}
	if v.State != studio.VideoDone || v.ProxySHA256 == nil {
		return "", echo.NewHTTPError(http.StatusNotFound, s.t(c, "video.not_ready"))
	}
	return *v.ProxySHA256, nil
}

// serveProxyPicture sends the proxy's picture without its sound track
// (media.ProxyPicture), which plays under the dub, with range requests as
// serveProxy does.
func (s *Server) serveProxyPicture(c echo.Context) error {
	sha, err := s.readyProxy(c)
	if err != nil {
		return err
	}
	blob, err := s.media.ProxyPicture(c.Request().Context(), sha)
	if err != nil {
		return err
	}
	return s.serveBlobRange(c, blob.SHA256, "video/mp4", "private, max-age=3600")
}

// servePreview sends the dub of the whole programme as it plays under the picture
// (media.PreviewMix): takes=approved plays approved takes only (else the latest),
// fill=original the original where a line has none (else silence), bed=1 the dub
// over the project's M&E bed, ducked (else the dub alone). The mix changes
// with the takes, so it is revalidated by its ETag (its hash) on each load.
func (s *Server) servePreview(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	opts := media.PreviewOpts{Approved: c.QueryParam("takes") == "approved", FillOriginal: c.QueryParam("fill") == "original",
		Bed: c.QueryParam("bed") == "1"}
	blob, err := s.media.PreviewMix(c.Request().Context(), p.ID, opts)
	if err != nil {
		return err
	}
	return s.serveBlobRange(c, blob.SHA256, "audio/wav", "private, no-cache")
}

// serveBlobRange sends a blob with its hash as ETag; c.File serves it through
// http.ServeContent (ranges, If-Range, If-None-Match), as serveBlob does.
func (s *Server) serveBlobRange(c echo.Context, sha, contentType, cacheControl string) error {
	path, err := s.blobs.Path(sha)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", cacheControl)
	h.Set("ETag", `"`+sha+`"`)
	return c.File(path)
}
