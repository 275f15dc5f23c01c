package studio

import (
	"context"
	"slices"

	"gorm.io/gorm"

	"dubstudio/i18n"
)

// ProjectLanguage is the project's language as one of PreviewVoices (the espeak-ng
// voice its new characters get), or "" when none is set.
func (s *Store) ProjectLanguage(ctx context.Context, projectID int64) (string, error) {
	var langs []string
	if err := s.db.WithContext(ctx).Raw(`SELECT language FROM projects WHERE id = ?`, projectID).Scan(&langs).Error; err != nil {
		return "", err
	}
	if len(langs) == 0 {
		return "", notFound(gorm.ErrRecordNotFound, "project")
	}
	return langs[0], nil
}

// SetProjectLanguage sets the project's language: one of PreviewVoices, or "" for
// none. Another value is refused with an error that unwraps to ErrInvalid.
func (s *Store) SetProjectLanguage(ctx context.Context, projectID int64, lang string) error {
	if lang != "" && !slices.Contains(PreviewVoices, lang) {
		return i18n.Errorf(ErrInvalid, "language.unknown")
	}
	res := s.db.WithContext(ctx).Exec(`UPDATE projects SET language = ? WHERE id = ?`, lang, projectID)
	if res.Error == nil && res.RowsAffected == 0 {
		return notFound(gorm.ErrRecordNotFound, "project")
	}
	return res.Error
}

// DefaultVoice is the preview voice a new character of a project in lang gets: the
// language's, else one guessed from a line of its text.
func DefaultVoice(lang, text string) string {
	if lang != "" {
		return lang
	}
	return guessVoice(text)
}
