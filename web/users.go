package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

func (s *Server) renderUsers(c echo.Context, status int, form views.UserForm, notice string) error {
	users, err := s.store.Users(c.Request().Context())
	if err != nil {
		return err
	}
	if form.Role == "" {
		form.Role = string(studio.RoleEditor)
	}
	throttled, err := s.store.ThrottledLogins(c.Request().Context(), time.Now().Add(-s.cfg.LoginFailWindow), s.cfg.LoginMaxFails)
	if err != nil {
		return err
	}
	return s.render(c, status, views.UsersPage(s.page(c, s.t(c, "users.title"), "users"), users, throttled, form, notice))
}

// unlockUser lifts the login throttle of a user from every address.
func (s *Server) unlockUser(c echo.Context) error {
	u, err := s.userParam(c)
	if err != nil {
		return err
	}
	if err := s.store.UnlockLogin(c.Request().Context(), u.ID); err != nil {
		return err
	}
	return s.renderUsers(c, http.StatusOK, views.UserForm{}, s.t(c, "users.unlocked", u.Username))
}

func (s *Server) listUsers(c echo.Context) error {
	return s.renderUsers(c, http.StatusOK, views.UserForm{}, "")
}

// createUser adds a user with a generated password, shown once to the admin.
func (s *Server) createUser(c echo.Context) error {
	form := views.UserForm{Username: c.FormValue("username"), DisplayName: c.FormValue("display_name"),
		Role: c.FormValue("role"), Errors: map[string]string{}}
	password := studio.GeneratePassword()
	u, err := s.store.CreateUser(c.Request().Context(), studio.CreateUserParams{
		Username: form.Username, DisplayName: form.DisplayName, Role: studio.Role(form.Role), Password: password})
	if err != nil {
		if errors.Is(err, studio.ErrInvalid) || errors.Is(err, studio.ErrConflict) {
			key := "username"
			if _, rerr := studio.ParseRole(form.Role); rerr != nil {
				key = "role"
			}
			form.Errors[key] = s.messageOf(c, 422, err)
			return s.renderUsers(c, http.StatusUnprocessableEntity, form, "")
		}
		return err
	}
	return s.renderUsers(c, http.StatusCreated, views.UserForm{}, s.t(c, "users.created", u.Username, password))
}

func (s *Server) userParam(c echo.Context) (*studio.User, error) {
	id, err := paramID(c, "uid")
	if err != nil {
		return nil, err
	}
	return s.store.User(c.Request().Context(), id)
}

func (s *Server) setUserRole(c echo.Context) error {
	u, err := s.userParam(c)
	if err != nil {
		return err
	}
	role, err := studio.ParseRole(c.FormValue("role"))
	if err != nil {
		return err
	}
	if err := s.store.SetUserRole(c.Request().Context(), u.ID, role); err != nil {
		return err
	}
	return s.renderUsers(c, http.StatusOK, views.UserForm{}, s.t(c, "users.role_changed", u.Username))
}

func (s *Server) resetUserPassword(c echo.Context) error {
	u, err := s.userParam(c)
	if err != nil {
		return err
	}
	password := studio.GeneratePassword()
	if err := s.store.SetUserPassword(c.Request().Context(), u.ID, password); err != nil {
		return err
	}
	return s.renderUsers(c, http.StatusOK, views.UserForm{}, s.t(c, "users.password_reset", u.Username, password))
}

func (s *Server) setUserDisabled(c echo.Context) error {
	u, err := s.userParam(c)
	if err != nil {
		return err
	}
	disabled := c.FormValue("disabled") == "1"
	if err := s.store.SetUserDisabled(c.Request().Context(), u.ID, disabled); err != nil {
		return err
	}
	return s.renderUsers(c, http.StatusOK, views.UserForm{}, "")
}
