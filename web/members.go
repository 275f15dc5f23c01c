package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

// memberHistoryLimit is how many changes of members the panel shows.
const memberHistoryLimit = 20

// membersVM builds a project's Members panel.
func (s *Server) membersVM(c echo.Context, p *studio.Project) (views.MembersVM, error) {
	ctx := c.Request().Context()
	vm := views.MembersVM{ProjectID: p.ID, Archived: p.Archived()}
	var err error
	if vm.Members, err = s.store.ProjectMembers(ctx, p.ID); err != nil {
		return vm, err
	}
	if vm.History, err = s.store.ProjectMemberHistory(ctx, p.ID, memberHistoryLimit); err != nil {
		return vm, err
	}
	users, err := s.store.Users(ctx)
	if err != nil {
		return vm, err
	}
	member := map[int64]bool{}
	for _, m := range vm.Members {
		member[m.UserID] = true
	}
	for _, u := range users {
		if u.Role == studio.RoleEditor && !u.Disabled && !member[u.ID] {
			vm.Candidates = append(vm.Candidates, u)
		}
	}
	return vm, nil
}

func (s *Server) addMember(c echo.Context) error {
	return s.changeMembers(c, func(p *studio.Project) error {
		uid, err := strconv.ParseInt(c.FormValue("user_id"), 10, 64)
		if err != nil {
			uid = 0 // the store refuses it with the message a user understands
		}
		return s.store.AddProjectMember(c.Request().Context(), currentUser(c).ID, p.ID, uid)
	})
}

func (s *Server) removeMember(c echo.Context) error {
	return s.changeMembers(c, func(p *studio.Project) error {
		uid, err := paramID(c, "uid")
		if err != nil {
			return err
		}
		return s.store.RemoveProjectMember(c.Request().Context(), currentUser(c).ID, p.ID, uid)
	})
}

// changeMembers applies change and answers with the Members panel (htmx) or the
// settings page; a refused change shows its message in the panel.
func (s *Server) changeMembers(c echo.Context, change func(p *studio.Project) error) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	status, msg := http.StatusOK, ""
	if err := change(p); err != nil {
		var ok bool
		if status, msg, ok = s.refusal(c, err); !ok {
			return err
		}
	}
	if !isHTMX(c) && msg == "" {
		return c.Redirect(http.StatusSeeOther, "/projects/"+strconv.FormatInt(p.ID, 10)+"/settings#members")
	}
	if !isHTMX(c) {
		svm, err := s.settingsVM(c, p) // a manager's settings carry the Members panel
		if err != nil {
			return err
		}
		svm.Members.Error = msg
		return s.renderSettings(c, status, svm)
	}
	vm, err := s.membersVM(c, p)
	if err != nil {
		return err
	}
	vm.Error = msg
	return s.render(c, status, views.MembersPanel(s.page(c, "", ""), vm))
}
