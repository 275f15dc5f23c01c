package web

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"dubstudio/i18n"
	"dubstudio/studio"
)

const ctxProject = "project"

// errArchived refuses a change to an archived project.
var errArchived = errors.New("project is archived")

// archivedWrites are the unsafe routes an archived project still answers: restoring
// and deleting it (manager actions), and playing a range of lines, which reads.
var archivedWrites = []string{
	"/projects/:pid/unarchive",
	"/projects/:pid/delete",
	"/projects/:pid/lines/range",
}

// projectAccess guards every route under /projects/:pid, before its role check and its
// handler: a project the user may not see (an editor who is not a member) is a 404,
// exactly like one that does not exist, so ids cannot be probed. The project it
// loaded is what Server.project returns to the handler.
func (s *Server) projectAccess(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := currentUser(c)
		if u == nil || !slices.Contains(c.ParamNames(), "pid") || !strings.HasPrefix(c.Path(), "/projects/:pid") {
			return next(c)
		}
		id, err := paramID(c, "pid")
		if err != nil {
			return err
		}
		p, err := s.store.ProjectFor(c.Request().Context(), u, id)
		if err != nil {
			return err
		}
		c.Set(ctxProject, p)
		return next(c)
	}
}

// refuseArchived comes after a route's role check: an archived project refuses every
// change (409, with the message) until a manager restores it; reads still work.
func (s *Server) refuseArchived(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, ok := c.Get(ctxProject).(*studio.Project)
		if ok && p.Archived() && !safeMethod(c.Request().Method) && !slices.Contains(archivedWrites, c.Path()) {
			return i18n.Errorf(errArchivedConflict, "project.archived_read_only")
		}
		return next(c)
	}
}

// errArchivedConflict is a conflict (409): the request is fine, the project's state
// refuses it.
var errArchivedConflict = errors.Join(errArchived, studio.ErrConflict)

// mayHearBlob is the check GET /blobs/:sha makes: the blob belongs to a project the
// user may see. Anything else is a 404, as for an unknown blob.
func (s *Server) mayHearBlob(c echo.Context, sum string) error {
	ok, err := s.store.MayHearBlob(c.Request().Context(), currentUser(c), sum)
	if err != nil {
		return err
	}
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	return nil
}

// projectsOpts lists, for the current user, the projects they may see.
func projectsOpts(c echo.Context, archived bool) studio.ProjectsOpts {
	opts := studio.ProjectsOpts{Archived: archived}
	if u := currentUser(c); u != nil && !u.SeesEveryProject() {
		opts.MemberID = u.ID
	}
	return opts
}
