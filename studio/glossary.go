package studio

import (
	"context"
	"strings"
	"time"

	"dubstudio/i18n"
)

// GlossaryEntry tells the engines how to say a term: a name, an acronym, a word in
// pinyin.
type GlossaryEntry struct {
	ID        int64
	ProjectID int64
	Term      string
	Spoken    string
	CreatedAt time.Time
}

// TableName keeps gorm on the table the migration creates.
func (GlossaryEntry) TableName() string { return "glossary" }

// Glossary returns a project's pronunciation glossary, longest terms first.
func (s *Store) Glossary(ctx context.Context, projectID int64) ([]GlossaryEntry, error) {
	var es []GlossaryEntry
	err := s.db.WithContext(ctx).Where("project_id = ?", projectID).Order("length(term) DESC, term").Find(&es).Error
	return es, err
}

// AddGlossaryEntry adds or replaces how a term is spoken.
func (s *Store) AddGlossaryEntry(ctx context.Context, projectID int64, term, spoken string) error {
	term, spoken = strings.TrimSpace(term), strings.TrimSpace(spoken)
	fe := FieldsError{}
	if term == "" || len([]rune(term)) > 100 {
		fe["term"] = i18n.Errorf(ErrInvalid, "glossary.bad_term")
	}
	if spoken == "" || len([]rune(spoken)) > 200 {
		fe["spoken"] = i18n.Errorf(ErrInvalid, "glossary.bad_spoken")
	}
	if len(fe) > 0 {
		return fe
	}
	return s.db.WithContext(ctx).Exec(`INSERT INTO glossary (project_id, term, spoken) VALUES (?, ?, ?)
		ON CONFLICT (project_id, term) DO UPDATE SET spoken = excluded.spoken`, projectID, term, spoken).Error
}

// DeleteGlossaryEntry removes a glossary entry.
func (s *Store) DeleteGlossaryEntry(ctx context.Context, projectID, id int64) error {
	return s.db.WithContext(ctx).Exec("DELETE FROM glossary WHERE project_id = ? AND id = ?", projectID, id).Error
}
