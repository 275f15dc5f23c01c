package studio

import (
	"errors"

	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"gorm.io/gorm"
	"strings"
	"time"
	"unicode"

	"golang.org/x/crypto/bcrypt"

	"dubstudio/i18n"
)

// Role decides what a user may do.
type Role string

const (
	RoleAdmin   Role = "admin"
	RoleManager Role = "manager"
	RoleEditor  Role = "editor"
)

// Roles lists every role, most powerful first.
var Roles = []Role{RoleAdmin, RoleManager, RoleEditor}

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", i18n.Errorf(ErrInvalid, "user.bad_role", s)
}

// AtLeast reports whether r includes the rights of least: admin > manager > editor.
// Managers watch and steer projects; editors edit them; admins do everything.
func (r Role) AtLeast(least Role) bool { return rank(r) >= rank(least) }

func rank(r Role) int {
	switch r {
	case RoleAdmin:
		return 3
	case RoleManager:
		return 2
	case RoleEditor:
		return 1
	}
	return 0
}

// User is a person who logs in.
type User struct {
	ID           int64
	Username     string
	DisplayName  string
	Role         Role
	PasswordHash string
	Lang         string
	Disabled     bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Name is what the interface shows for u.
func (u User) Name() string {
	if u.DisplayName != "" {
		return u.DisplayName
	}
	return u.Username
}

const minPasswordLen = 10

// ValidateUsername checks a new user name.
func ValidateUsername(name string) error {
	if len(name) < 2 || len(name) > 64 {
		return i18n.Errorf(ErrInvalid, "user.bad_username")
	}
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("._-@", r) {
			return i18n.Errorf(ErrInvalid, "user.bad_username")
		}
	}
	return nil
}

// ValidatePassword checks a new password.
func ValidatePassword(pw string) error {
	if len(pw) < minPasswordLen || len(pw) > 72 {
		return i18n.Errorf(ErrInvalid, "user.bad_password", minPasswordLen)
	}
	return nil
}

// CreateUserParams are the inputs of CreateUser.
type CreateUserParams struct {
	Username    string
	DisplayName string
	Role        Role
	Password    string
}

// CreateUser adds a user with a bcrypt-hashed password.
func (s *Store) CreateUser(ctx context.Context, p CreateUserParams) (*User, error) {
	p.Username = strings.TrimSpace(p.Username)
	if err := ValidateUsername(p.Username); err != nil {
		return nil, err
	}
	if _, err := ParseRole(string(p.Role)); err != nil {
		return nil, err
	}
	if err := ValidatePassword(p.Password); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(p.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, err
	}
	u := &User{Username: p.Username, DisplayName: strings.TrimSpace(p.DisplayName), Role: p.Role, PasswordHash: string(hash)}
	if err := s.db.WithContext(ctx).Create(u).Error; err != nil {
		if isUniqueViolation(err) {
			return nil, i18n.Errorf(ErrConflict, "user.exists", p.Username)
		}
		return nil, fmt.Errorf("error creating user: %w", err)
	}
	return u, nil
}

// User returns the user with id.
func (s *Store) User(ctx context.Context, id int64) (*User, error) {
	var u User
	err := s.db.WithContext(ctx).First(&u, id).Error
	return &u, notFound(err, "user")
}

// UserByUsername finds a user by name, case-insensitively.
func (s *Store) UserByUsername(ctx context.Context, name string) (*User, error) {
	var u User
	err := s.db.WithContext(ctx).Where("lower(username) = lower(?)", strings.TrimSpace(name)).First(&u).Error
	return &u, notFound(err, "user")
}

// Users lists every user by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	var us []User
	err := s.db.WithContext(ctx).Order("lower(username)").Find(&us).Error
	return us, err
}

// CountUsers returns how many users exist.
func (s *Store) CountUsers(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&User{}).Count(&n).Error
	return n, err
}

// SetUserRole changes a user's role. The last enabled admin cannot be demoted.
func (s *Store) SetUserRole(ctx context.Context, id int64, role Role) error {
	if _, err := ParseRole(string(role)); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if role != RoleAdmin {
			if err := lastAdminGuard(tx, id); err != nil {
				return err
			}
		}
		res := tx.Model(&User{}).Where("id = ?", id).Updates(map[string]any{"role": role, "updated_at": time.Now()})
		if res.Error == nil && res.RowsAffected == 0 {
			return fmt.Errorf("user %d: %w", id, ErrNotFound)
		}
		return res.Error
	})
}

// SetUserDisabled enables or disables a login. Disabling ends the user's sessions.
func (s *Store) SetUserDisabled(ctx context.Context, id int64, disabled bool) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if disabled {
			if err := lastAdminGuard(tx, id); err != nil {
				return err
			}
			if err := tx.Exec("DELETE FROM sessions WHERE user_id = ?", id).Error; err != nil {
				return err
			}
		}
		res := tx.Model(&User{}).Where("id = ?", id).Updates(map[string]any{"disabled": disabled, "updated_at": time.Now()})
		if res.Error == nil && res.RowsAffected == 0 {
			return fmt.Errorf("user %d: %w", id, ErrNotFound)
		}
		return res.Error
	})
}

func lastAdminGuard(tx *gorm.DB, id int64) error {
	var others int64
	err := tx.Raw(`SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled AND id <> ?`, id).Scan(&others).Error
	if err != nil {
		return err
	}
	var isAdmin bool
	if err := tx.Raw(`SELECT EXISTS (SELECT 1 FROM users WHERE id = ? AND role = 'admin' AND NOT disabled)`, id).Scan(&isAdmin).Error; err != nil {
		return err
	}
	if isAdmin && others == 0 {
		return i18n.Errorf(ErrInvalid, "user.last_admin")
	}
	return nil
}

// SetUserPassword replaces a password and ends the user's other sessions.
func (s *Store) SetUserPassword(ctx context.Context, id int64, password string) error {
	if err := ValidatePassword(password); err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&User{}).Where("id = ?", id).Updates(map[string]any{"password_hash": string(hash), "updated_at": time.Now()})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("user %d: %w", id, ErrNotFound)
		}
		if err := unlockLogin(tx, id); err != nil {
			return err
		}
		return tx.Exec("DELETE FROM sessions WHERE user_id = ?", id).Error
	})
}

// UnlockLogin forgets a user's failed logins from every address, so that a login
// throttle an attacker ran up ends at once (an admin's unlock; a new password does
// the same).
func (s *Store) UnlockLogin(ctx context.Context, id int64) error {
	return unlockLogin(s.db.WithContext(ctx), id)
}

func unlockLogin(db *gorm.DB, id int64) error {
	return db.Exec("DELETE FROM login_failures WHERE lower(username) = (SELECT lower(username) FROM users WHERE id = ?)", id).Error
}

// ThrottledLogins counts, per user ID, the addresses whose failed logins since a time
// reach maxFails: the users an admin may want to unlock.
func (s *Store) ThrottledLogins(ctx context.Context, since time.Time, maxFails int) (map[int64]int, error) {
	var rows []struct {
		ID        int64
		Addresses int
	}
	err := s.db.WithContext(ctx).Raw(`SELECT u.id, count(*) AS addresses FROM (
			SELECT lower(username) AS name, remote_ip FROM login_failures WHERE created_at > ?
			GROUP BY 1, 2 HAVING count(*) >= ?) f
		JOIN users u ON lower(u.username) = f.name GROUP BY u.id`, since, maxFails).Scan(&rows).Error
	out := make(map[int64]int, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Addresses
	}
	return out, err
}

// SetUserLang stores the interface language a user chose ("" follows the browser).
func (s *Store) SetUserLang(ctx context.Context, id int64, lang string) error {
	if lang != "" {
		if _, ok := i18n.Parse(lang); !ok {
			return i18n.Errorf(ErrInvalid, "user.bad_lang")
		}
	}
	return s.db.WithContext(ctx).Model(&User{}).Where("id = ?", id).Update("lang", lang).Error
}

// dummyHash keeps the time of a login for an unknown user close to a known one.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("dubstudio-dummy-password"), bcrypt.DefaultCost)

// Authenticate checks a user name and password. Any failure returns ErrForbidden
// without saying which part was wrong.
func (s *Store) Authenticate(ctx context.Context, username, password string) (*User, error) {
	u, err := s.UserByUsername(ctx, username)
	if err != nil {
		bcrypt.CompareHashAndPassword(dummyHash, []byte(password)) //nolint:errcheck
		if errors.Is(err, ErrNotFound) {
			return nil, i18n.Errorf(ErrForbidden, "login.failed")
		}
		return nil, err
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil || u.Disabled {
		return nil, i18n.Errorf(ErrForbidden, "login.failed")
	}
	return u, nil
}

// Session is a logged-in browser.
type Session struct {
	ID         string // SHA-256 of the cookie token
	UserID     int64
	CSRFToken  string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time
	User       *User `gorm:"foreignKey:UserID"`
}

// CreateSession starts a session for u and returns the token for the cookie; only its
// hash is stored.
func (s *Store) CreateSession(ctx context.Context, userID int64, ttl time.Duration) (token string, sess *Session, err error) {
	token = randomToken()
	sess = &Session{
		ID:        hashToken(token),
		UserID:    userID,
		CSRFToken: randomToken(),
		ExpiresAt: time.Now().Add(ttl),
	}
	if err := s.db.WithContext(ctx).Omit("User").Create(sess).Error; err != nil {
		return "", nil, fmt.Errorf("error creating session: %w", err)
	}
	return token, sess, nil
}

// SessionByToken returns the live session for a cookie token with its user, sliding
// its expiry forward by ttl. Expired sessions and disabled users are not found.
func (s *Store) SessionByToken(ctx context.Context, token string, ttl time.Duration) (*Session, error) {
	var sess Session
	err := s.db.WithContext(ctx).Preload("User").
		Where("id = ? AND expires_at > now()", hashToken(token)).First(&sess).Error
	if err != nil {
		return nil, notFound(err, "session")
	}
	if sess.User == nil || sess.User.Disabled {
		return nil, fmt.Errorf("session: %w", ErrNotFound)
	}
	// Touch at most once a minute to keep writes off the hot path.
	if time.Since(sess.LastSeenAt) > time.Minute {
		now := time.Now()
		sess.LastSeenAt, sess.ExpiresAt = now, now.Add(ttl)
		s.db.WithContext(ctx).Model(&Session{}).Where("id = ?", sess.ID).
			Updates(map[string]any{"last_seen_at": now, "expires_at": sess.ExpiresAt})
	}
	return &sess, nil
}

// DeleteSession logs a browser out.
func (s *Store) DeleteSession(ctx context.Context, token string) error {
	return s.db.WithContext(ctx).Exec("DELETE FROM sessions WHERE id = ?", hashToken(token)).Error
}

// DeleteExpiredSessions removes sessions past their expiry and old login failures.
func (s *Store) DeleteExpiredSessions(ctx context.Context) error {
	if err := s.db.WithContext(ctx).Exec("DELETE FROM sessions WHERE expires_at < now()").Error; err != nil {
		return err
	}
	return s.db.WithContext(ctx).Exec("DELETE FROM login_failures WHERE created_at < now() - interval '1 day'").Error
}

// RecordLoginFailure notes a failed login for throttling.
func (s *Store) RecordLoginFailure(ctx context.Context, username, ip string) error {
	return s.db.WithContext(ctx).Exec("INSERT INTO login_failures (username, remote_ip) VALUES (?, ?)", username, ip).Error
}

// LoginFailures counts failed logins for a user name from an address since a time.
func (s *Store) LoginFailures(ctx context.Context, username, ip string, since time.Time) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Raw(`SELECT count(*) FROM login_failures
		WHERE lower(username) = lower(?) AND remote_ip = ? AND created_at > ?`, username, ip, since).Scan(&n).Error
	return n, err
}

// ClearLoginFailures forgets failures after a successful login.
func (s *Store) ClearLoginFailures(ctx context.Context, username, ip string) error {
	return s.db.WithContext(ctx).Exec(`DELETE FROM login_failures WHERE lower(username) = lower(?) AND remote_ip = ?`, username, ip).Error
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// GeneratePassword returns a random password for a new admin.
func GeneratePassword() string { return randomToken()[:20] }
