package studio

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CreateDatabase creates the database databaseURL names when the server has none of
// that name, connecting to the server's "postgres" (or "template1") database as the
// same user. It reports whether it created one. Where the user may not create
// databases, the error says in one sentence what to do instead.
func CreateDatabase(ctx context.Context, databaseURL string) (created bool, err error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return false, fmt.Errorf("error parsing DATABASE_URL: %w", err)
	}
	where := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return false, conn.Close(ctx)
	}
	if pgCode(err) != "3D000" { // anything but invalid_catalog_name: the server is the problem
		return false, fmt.Errorf("cannot connect to PostgreSQL at %s as %q (start it, or fix DATABASE_URL): %w", where, cfg.User, err)
	}
	admin := cfg.Copy()
	for _, db := range []string{"postgres", "template1"} {
		admin.Database = db
		if conn, err = pgx.ConnectConfig(ctx, admin); err == nil {
			break
		}
	}
	if err != nil {
		return false, fmt.Errorf("the database %q does not exist on %s and no other database there lets %q in to create it: create it as a PostgreSQL superuser (createdb -h %s -p %d -O %s %s): %w",
			cfg.Database, where, cfg.User, cfg.Host, cfg.Port, cfg.User, cfg.Database, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
	switch code := pgCode(err); {
	case err == nil:
		return true, nil
	case code == "42P04": // duplicate_database: another process made it in the meantime
		return false, nil
	case code == "42501": // insufficient_privilege
		return false, fmt.Errorf("the database %q does not exist on %s and the user %q may not create it: create it as a PostgreSQL superuser (createdb -h %s -p %d -O %s %s), or set DATABASE_URL to a database that exists",
			cfg.Database, where, cfg.User, cfg.Host, cfg.Port, cfg.User, cfg.Database)
	}
	return false, fmt.Errorf("error creating the database %q on %s: %w", cfg.Database, where, err)
}

// pgCode is the SQLSTATE of a PostgreSQL error in err's chain, or "".
// IsMissingDatabase reports whether err says the database it connected to does not
// exist (SQLSTATE 3D000), which `dubstudio createdb` can mend.
func IsMissingDatabase(err error) bool { return pgCode(err) == "3D000" }

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// EnsureAdmin creates the first administrator when there are no users at all. It
// returns the generated password, to be printed once, or "" when users exist.
func (s *Store) EnsureAdmin(ctx context.Context) (username, password string, err error) {
	n, err := s.CountUsers(ctx)
	if err != nil || n > 0 {
		return "", "", err
	}
	password = GeneratePassword()
	if _, err := s.CreateUser(ctx, CreateUserParams{Username: "admin", DisplayName: "Administrator", Role: RoleAdmin, Password: password}); err != nil {
		return "", "", fmt.Errorf("error creating the first admin: %w", err)
	}
	return "admin", password, nil
}

const demoSetting = "demo_project_created"

// demoScript is a short scene with three characters, so that a new studio sees lines,
// characters and states at once. Times are in milliseconds.
var demoScript = []NewLine{
	{1, 1000, 3200, "Mara", "The signal came back. It's faint, but it's ours.", ""},
	{2, 3600, 5400, "Theo", "How long until they reach the harbour?", ""},
	{3, 5800, 9300, "Mara", "Two hours, if the storm holds. Less, if it doesn't.", "worried, speaking quickly"},
	{4, 9800, 11600, "Captain Ives", "Then we don't wait for the storm.", ""},
	{5, 12000, 14800, "Theo", "You want to sail into that? Tonight?", "0.1,0,0,0.3,0,0,0.2,0"},
	{6, 15200, 18500, "Captain Ives", "I want to bring them home. Ready the boat, both of you.", ""},
	{7, 19000, 20600, "Mara", "Aye, Captain.", ""},
	{8, 21000, 24200, "Theo", "\"Bring them home,\" she says. As if the sea ever listens.", ""},
}

// EnsureDemoProject creates the demo project on the first run of a new installation
// and never again, even if it is later deleted. It returns the demo project, on later
// runs too, or nil once it has been deleted.
func (s *Store) EnsureDemoProject(ctx context.Context, owner int64) (*Project, error) {
	done, err := s.Setting(ctx, demoSetting)
	if err != nil {
		return nil, err
	}
	if done != "" {
		// The setting holds the demo's ID. Installations from before stored "1":
		// project 1, the first one made, which is the demo.
		id, err := strconv.ParseInt(done, 10, 64)
		if err != nil {
			return nil, nil //nolint:nilerr // a setting that is no ID names no demo project: nothing to show
		}
		p, err := s.Project(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		return p, err
	}
	p, err := s.CreateProject(ctx, "Demo: Harbour Lights (episode 1)", &owner)
	if err != nil {
		return nil, err
	}
	if _, err := s.ImportLines(ctx, owner, p.ID, demoScript); err != nil {
		return nil, fmt.Errorf("error importing the demo script: %w", err)
	}
	voices := map[string]string{"Mara": "en-gb-x-rp", "Theo": "en-us", "Captain Ives": "en"}
	chars, err := s.Characters(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	for _, c := range chars {
		if v, ok := voices[c.Name]; ok {
			if err := s.UpdateCharacter(ctx, p.ID, c.ID, CharacterParams{Name: c.Name, Color: c.Color, Emotion: c.Emotion, PreviewVoice: v}); err != nil {
				return nil, err
			}
		}
	}
	return p, s.SetSetting(ctx, demoSetting, strconv.FormatInt(p.ID, 10))
}
