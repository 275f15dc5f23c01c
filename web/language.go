package web

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"dubstudio/studio"
	"dubstudio/views"
)

// languageRoutes are the project language card's.
func (s *Server) languageRoutes(editor *echo.Group) {
	editor.GET("/projects/:pid/language", s.showLanguage)
	editor.POST("/projects/:pid/language", s.saveLanguage)
}

func (s *Server) showLanguage(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	lang, err := s.store.ProjectLanguage(c.Request().Context(), p.ID)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.LanguageCard(s.page(c, "", ""), views.LanguageVM{ProjectID: p.ID, Language: lang}))
}

// saveLanguage sets the project's language; an unknown one is refused in the card.
func (s *Server) saveLanguage(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	vm := views.LanguageVM{ProjectID: p.ID, Language: c.FormValue("language")}
	if err := s.store.SetProjectLanguage(c.Request().Context(), p.ID, vm.Language); err != nil {
		status, msg, ok := s.refusal(c, err)
		if !ok {
			return err
		}
		vm.Error = msg
		vm.Language, _ = s.store.ProjectLanguage(c.Request().Context(), p.ID)
		return s.render(c, status, views.LanguageCard(s.page(c, "", ""), vm))
	}
	vm.Saved = true
	return s.render(c, http.StatusOK, views.LanguageCard(s.page(c, "", ""), vm))
}

// newCharacterVoice is the preview voice the new-character form starts with: the
// project language's, else English.
func (s *Server) newCharacterVoice(ctx context.Context, projectID int64) (string, error) {
	lang, err := s.store.ProjectLanguage(ctx, projectID)
	return studio.DefaultVoice(lang, ""), err
}
