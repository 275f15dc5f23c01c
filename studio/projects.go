package studio

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"dubstudio/i18n"
)

// Project is one dubbing job: a script of timed lines spoken by characters.
type Project struct {
	ID           int64
	Name         string
	ArchivedAt   *time.Time
	CreatedBy    *int64
	StretchMin   float64
	StretchMax   float64
	GapBorrowMs  int
	LoudnessLUFS float64 `gorm:"column:loudness_lufs"`
	MaxSpeedStep float64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Archived reports whether p is archived.
func (p Project) Archived() bool { return p.ArchivedAt != nil }

// ValidateProjectName checks a project name.
func ValidateProjectName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len([]rune(name)) > 200 {
		return "", i18n.Errorf(ErrInvalid, "project.bad_name")
	}
	if !cleanName(name) {
		return "", i18n.Errorf(ErrInvalid, "name.bad_chars")
	}
	return name, nil
}

// cleanName reports whether a name is valid UTF-8 without control characters.
// PostgreSQL refuses NUL bytes and invalid UTF-8 in text (a 500 rather than a
// message), and no name needs a control character.
func cleanName(name string) bool {
	if !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// CreateProject adds a project; its creator, when given, is its first member.
func (s *Store) CreateProject(ctx context.Context, name string, createdBy *int64) (*Project, error) {
	name, err := ValidateProjectName(name)
	if err != nil {
		return nil, err
	}
	p := &Project{Name: name, CreatedBy: createdBy, StretchMin: 0.85, StretchMax: 1.25, GapBorrowMs: 300, LoudnessLUFS: -23, MaxSpeedStep: 0.15}
	err = s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(p).Error; err != nil {
			return err
		}
		if createdBy == nil {
			return nil
		}
		return addCreator(tx, p.ID, *createdBy)
	})
	if err != nil {
		return nil, fmt.Errorf("error creating project: %w", err)
	}
	return p, nil
}

// Project returns the project with id.
func (s *Store) Project(ctx context.Context, id int64) (*Project, error) {
	var p Project
	err := s.db.WithContext(ctx).First(&p, id).Error
	return &p, notFound(err, "project")
}

// ProjectsOpts filters Projects.
type ProjectsOpts struct {
	Archived bool // list archived projects instead of active ones
	// MemberID, when not 0, lists only the projects this user is a member of (an
	// editor's list).
	MemberID int64
}

// Projects lists projects, newest first.
func (s *Store) Projects(ctx context.Context, opts ProjectsOpts) ([]Project, error) {
	var ps []Project
	q := s.db.WithContext(ctx).Order("id DESC")
	if opts.Archived {
		q = q.Where("archived_at IS NOT NULL")
	} else {
		q = q.Where("archived_at IS NULL")
	}
	if opts.MemberID != 0 {
		q = q.Where("id IN (SELECT project_id FROM project_members WHERE user_id = ?)", opts.MemberID)
	}
	return ps, q.Find(&ps).Error
}

// CountProjects counts every project, archived or not.
func (s *Store) CountProjects(ctx context.Context) (int64, error) {
	var n int64
	return n, s.db.WithContext(ctx).Model(&Project{}).Count(&n).Error
}

// RenameProject changes a project's name.
func (s *Store) RenameProject(ctx context.Context, id int64, name string) error {
	name, err := ValidateProjectName(name)
	if err != nil {
		return err
	}
	return s.updateProject(ctx, id, map[string]any{"name": name})
}

// SetProjectArchived archives or restores a project.
func (s *Store) SetProjectArchived(ctx context.Context, id int64, archived bool) error {
	var at any
	if archived {
		at = time.Now()
	}
	return s.updateProject(ctx, id, map[string]any{"archived_at": at})
}

func (s *Store) updateProject(ctx context.Context, id int64, fields map[string]any) error {
	fields["updated_at"] = time.Now()
	res := s.db.WithContext(ctx).Model(&Project{}).Where("id = ?", id).Updates(fields)
	if res.Error == nil && res.RowsAffected == 0 {
		return fmt.Errorf("project %d: %w", id, ErrNotFound)
	}
	return res.Error
}

// DeleteProject removes a project with its characters, lines and history.
func (s *Store) DeleteProject(ctx context.Context, id int64) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("DELETE FROM projects WHERE id = ?", id)
		if res.Error == nil && res.RowsAffected == 0 {
			return fmt.Errorf("project %d: %w", id, ErrNotFound)
		}
		return res.Error
	})
}

// StateCounts maps a line state to how many lines are in it.
type StateCounts map[LineState]int

// Total is the number of lines counted.
func (c StateCounts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// ProjectStateCounts returns line counts by state for each of the projects.
func (s *Store) ProjectStateCounts(ctx context.Context, projectIDs []int64) (map[int64]StateCounts, error) {
	out := make(map[int64]StateCounts, len(projectIDs))
	if len(projectIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		ProjectID int64
		State     LineState
		N         int
	}
	err := s.db.WithContext(ctx).Raw(`SELECT project_id, state, count(*) AS n FROM lines
		WHERE project_id IN ? GROUP BY project_id, state`, projectIDs).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if out[r.ProjectID] == nil {
			out[r.ProjectID] = StateCounts{}
		}
		out[r.ProjectID][r.State] = r.N
	}
	return out, nil
}

// FitSettings are a project's duration-lock limits.
type FitSettings struct {
	StretchMin   float64
	StretchMax   float64
	GapBorrowMs  int
	LoudnessLUFS float64
	MaxSpeedStep float64
}

// inRange says whether x is a number from lo to hi. NaN is in no range: it fails
// every comparison, so "x < lo || x > hi" let it through.
func inRange(x, lo, hi float64) bool { return x >= lo && x <= hi }

// Validate checks the limits, field by field.
func (f FitSettings) Validate() error {
	fe := FieldsError{}
	if !inRange(f.StretchMin, 0.5, 1) {
		fe["stretch_min"] = i18n.Errorf(ErrInvalid, "project.bad_stretch_min")
	}
	if !inRange(f.StretchMax, 1, 2) {
		fe["stretch_max"] = i18n.Errorf(ErrInvalid, "project.bad_stretch_max")
	}
	if f.GapBorrowMs < 0 || f.GapBorrowMs > 2000 {
		fe["gap_borrow_ms"] = i18n.Errorf(ErrInvalid, "project.bad_gap_borrow")
	}
	if !inRange(f.LoudnessLUFS, -40, -5) {
		fe["loudness_lufs"] = i18n.Errorf(ErrInvalid, "project.bad_loudness")
	}
	if !inRange(f.MaxSpeedStep, 0, 1) {
		fe["max_speed_step"] = i18n.Errorf(ErrInvalid, "project.bad_speed_step")
	}
	if len(fe) > 0 {
		return fe
	}
	return nil
}

// SetFitSettings changes a project's duration-lock limits; they apply to lines fitted
// from now on.
func (s *Store) SetFitSettings(ctx context.Context, id int64, f FitSettings) error {
	if err := f.Validate(); err != nil {
		return err
	}
	return s.updateProject(ctx, id, map[string]any{"stretch_min": f.StretchMin, "stretch_max": f.StretchMax,
		"gap_borrow_ms": f.GapBorrowMs, "loudness_lufs": f.LoudnessLUFS, "max_speed_step": f.MaxSpeedStep})
}

// FitSettings returns the project's current limits.
func (p Project) FitSettings() FitSettings {
	return FitSettings{p.StretchMin, p.StretchMax, p.GapBorrowMs, p.LoudnessLUFS, p.MaxSpeedStep}
}
