package studio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"dubstudio/i18n"
)

// SeesEveryProject reports whether u sees every project (managers and admins) rather
// than only those they are a member of (editors).
func (u User) SeesEveryProject() bool { return u.Role.AtLeast(RoleManager) }

// ProjectFor returns the project with id if u may see it: managers and admins see
// every project, an editor only those they are a member of. A project u may not see
// is ErrNotFound, like one that does not exist, so that ids cannot be probed.
func (s *Store) ProjectFor(ctx context.Context, u *User, id int64) (*Project, error) {
	var p Project
	q := s.db.WithContext(ctx).Where("id = ?", id)
	if !u.SeesEveryProject() {
		q = q.Where("EXISTS (SELECT 1 FROM project_members m WHERE m.project_id = projects.id AND m.user_id = ?)", u.ID)
	}
	err := q.First(&p).Error
	return &p, notFound(err, "project")
}

// MayHearBlob reports whether u may fetch the blob sha256: managers and admins any
// blob of any project, an editor a blob of a project they are a member of. One
// primary-key lookup in project_blobs (joined to project_members by its key).
func (s *Store) MayHearBlob(ctx context.Context, u *User, sha256 string) (bool, error) {
	var ok bool
	var err error
	if u.SeesEveryProject() {
		err = s.db.WithContext(ctx).Raw("SELECT EXISTS (SELECT 1 FROM project_blobs WHERE sha256 = ?)", sha256).Scan(&ok).Error
	} else {
		err = s.db.WithContext(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM project_blobs b
			JOIN project_members m ON m.project_id = b.project_id AND m.user_id = ? WHERE b.sha256 = ?)`, u.ID, sha256).Scan(&ok).Error
	}
	return ok, err
}

// LinkProjectBlob records that the blob sha256 belongs to the project, for audio the
// triggers of migration 0012 do not see (derived audio, such as a played range).
func (s *Store) LinkProjectBlob(ctx context.Context, projectID int64, sha256 string) error {
	return s.db.WithContext(ctx).Exec(`INSERT INTO project_blobs (sha256, project_id) VALUES (?, ?)
		ON CONFLICT DO NOTHING`, sha256, projectID).Error
}

// ProjectMember is a user who may see and change a project.
type ProjectMember struct {
	UserID      int64
	Username    string
	DisplayName string
	Role        Role
	Disabled    bool
	AddedBy     string // the name of who added them; "" when unknown or deleted
	AddedAt     time.Time
}

// Name is what the interface shows for the member.
func (m ProjectMember) Name() string {
	return User{Username: m.Username, DisplayName: m.DisplayName}.Name()
}

// ProjectMembers lists a project's members by name.
func (s *Store) ProjectMembers(ctx context.Context, projectID int64) ([]ProjectMember, error) {
	var ms []ProjectMember
	err := s.db.WithContext(ctx).Raw(`SELECT u.id AS user_id, u.username, u.display_name, u.role, u.disabled,
			COALESCE(NULLIF(a.display_name, ''), a.username, '') AS added_by, m.added_at
		FROM project_members m JOIN users u ON u.id = m.user_id LEFT JOIN users a ON a.id = m.added_by
		WHERE m.project_id = ? ORDER BY lower(u.username)`, projectID).Scan(&ms).Error
	return ms, err
}

// MemberEvent is one change of a project's members.
type MemberEvent struct {
	Action    string // "add" or "remove"
	User      string // the member's name; "" when the user was deleted
	By        string // who did it; "" when unknown
	CreatedAt time.Time
}

// ProjectMemberHistory returns the latest limit changes of a project's members,
// newest first.
func (s *Store) ProjectMemberHistory(ctx context.Context, projectID int64, limit int) ([]MemberEvent, error) {
	var es []MemberEvent
	err := s.db.WithContext(ctx).Raw(`SELECT h.action, COALESCE(NULLIF(u.display_name, ''), u.username, '') AS "user",
			COALESCE(NULLIF(b.display_name, ''), b.username, '') AS by, h.created_at
		FROM project_member_history h LEFT JOIN users u ON u.id = h.user_id LEFT JOIN users b ON b.id = h.by_user
		WHERE h.project_id = ? ORDER BY h.id DESC LIMIT ?`, projectID, limit).Scan(&es).Error
	return es, err
}

// AddProjectMember makes the user a member of the project, recording who did it. Only
// an enabled editor can be added (managers and admins see every project anyway);
// adding a member again changes nothing.
func (s *Store) AddProjectMember(ctx context.Context, by, projectID, userID int64) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		var u User
		if err := tx.First(&u, userID).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return i18n.Errorf(ErrInvalid, "members.bad_user")
			}
			return err
		}
		if u.Role != RoleEditor || u.Disabled {
			return i18n.Errorf(ErrInvalid, "members.bad_user")
		}
		res := tx.Exec(`INSERT INTO project_members (project_id, user_id, added_by) VALUES (?, ?, ?)
			ON CONFLICT DO NOTHING`, projectID, userID, by)
		if res.Error != nil {
			return fmt.Errorf("error adding member %d to project %d: %w", userID, projectID, res.Error)
		}
		if res.RowsAffected == 0 {
			return nil
		}
		return memberEvent(tx, projectID, userID, by, "add")
	})
}

// RemoveProjectMember takes the user off the project's members, recording who did it.
// Removing a user who is no member changes nothing.
func (s *Store) RemoveProjectMember(ctx context.Context, by, projectID, userID int64) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("DELETE FROM project_members WHERE project_id = ? AND user_id = ?", projectID, userID)
		if res.Error != nil {
			return fmt.Errorf("error removing member %d from project %d: %w", userID, projectID, res.Error)
		}
		if res.RowsAffected == 0 {
			return nil
		}
		return memberEvent(tx, projectID, userID, by, "remove")
	})
}

func memberEvent(tx *gorm.DB, projectID, userID, by int64, action string) error {
	return tx.Exec("INSERT INTO project_member_history (project_id, user_id, action, by_user) VALUES (?, ?, ?, ?)",
		projectID, userID, action, by).Error
}

// addCreator makes a project's creator its first member, in the transaction that
// creates it.
func addCreator(tx *gorm.DB, projectID, userID int64) error {
	if err := tx.Exec("INSERT INTO project_members (project_id, user_id, added_by) VALUES (?, ?, ?)",
		projectID, userID, userID).Error; err != nil {
		return err
	}
	return memberEvent(tx, projectID, userID, userID, "add")
}
