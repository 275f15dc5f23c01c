package studio

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

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
			return nil, nil
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
