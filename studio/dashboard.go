package studio

import (
	"context"
	"fmt"
	"time"
)

// DashboardParams fix the moment a dashboard's numbers are taken at, so that they can
// be computed for any time (and tested without a clock).
type DashboardParams struct {
	Now    time.Time     // the end of the throughput window; zero: the database's now()
	Window time.Duration // how far back throughput looks; zero: 15 minutes
}

// withDefaults fills in p's defaults. The window ends by the database's clock, the
// one that stamped the takes (created_at DEFAULT now()): by the web server's, a
// database ahead of it put the latest takes after the window's end, and one behind
// it emptied the window's first minutes.
func (s *Store) withDefaults(ctx context.Context, p DashboardParams) (DashboardParams, error) {
	if p.Now.IsZero() {
		if err := queryRow(s.db.WithContext(ctx), `SELECT now()`, nil, &p.Now); err != nil {
			return p, fmt.Errorf("error reading the database's clock: %w", err)
		}
	}
	if p.Window <= 0 {
		p.Window = 15 * time.Minute
	}
	return p, nil
}

// Throughput is what was rendered during a window: one take per rendered line.
type Throughput struct {
	Window time.Duration
	// Takes counts the takes rendered in the window; refits (Take.RefitOf), which
	// rendered nothing, are left out.
	Takes   int
	AudioMs int64 // the takes' length after the duration lock
}

// LinesPerMinute is the rate lines were rendered at.
func (t Throughput) LinesPerMinute() float64 {
	if t.Window <= 0 {
		return 0
	}
	return float64(t.Takes) / t.Window.Minutes()
}

// AudioMinutesPerHour is the rate audio was rendered at, in minutes of audio per hour.
func (t Throughput) AudioMinutesPerHour() float64 {
	if t.Window <= 0 {
		return 0
	}
	return float64(t.AudioMs) / 60000 / t.Window.Hours()
}

// ProjectStats are one project's numbers for the managers' dashboard.
type ProjectStats struct {
	ProjectID     int64
	Counts        StateCounts
	TotalAudioMs  int64 // the slots of every line
	DoneAudioMs   int64 // the slots of lines done or waiting for review
	ActiveAudioMs int64 // the slots of lines queued or rendering (Active)
	Recent        Throughput
	// Approved is the number of lines with an approved take; Reviewed the lines
	// someone acted on in review (approved, commented, went back to a take, asked for
	// a new one).
	Approved int
	Reviewed int
}

// Active is the number of lines queued or rendering: the work an ETA is about.
func (s ProjectStats) Active() int {
	n := 0
	for st, c := range s.Counts {
		if st.Active() {
			n += c
		}
	}
	return n
}

// Failed is the number of failed lines, which need someone to act.
func (s ProjectStats) Failed() int { return s.Counts[StateFailed] }

// RemainingAudioMs is the audio still to render.
func (s ProjectStats) RemainingAudioMs() int64 { return max(0, s.TotalAudioMs-s.DoneAudioMs) }

// DoneFraction is the share of the project's audio that is rendered, from 0 to 1.
func (s ProjectStats) DoneFraction() float64 {
	if s.TotalAudioMs <= 0 {
		return 0
	}
	return float64(s.DoneAudioMs) / float64(s.TotalAudioMs)
}

// ETA estimates how long the lines queued or rendering take at the recent rate:
// drafts and failed lines are not counted, since nothing renders them until someone
// queues them. ok is false when lines are queued but nothing was rendered recently.
func (s ProjectStats) ETA() (eta time.Duration, ok bool) {
	remaining := s.ActiveAudioMs
	if remaining == 0 {
		return 0, true
	}
	if s.Recent.AudioMs <= 0 || s.Recent.Window <= 0 {
		return 0, false
	}
	perMs := float64(s.Recent.AudioMs) / float64(s.Recent.Window.Milliseconds())
	return time.Duration(float64(remaining)/perMs) * time.Millisecond, true
}

// doneStates are the states whose audio counts as rendered.
var doneStates = []LineState{StateDone, StateNeedsReview}

// ProjectStats returns the dashboard numbers of each of the projects (every project
// asked for is in the map, with zeros when it has no lines).
func (s *Store) ProjectStats(ctx context.Context, projectIDs []int64, p DashboardParams) (map[int64]*ProjectStats, error) {
	out := make(map[int64]*ProjectStats, len(projectIDs))
	if len(projectIDs) == 0 {
		return out, nil
	}
	p, err := s.withDefaults(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, id := range projectIDs {
		out[id] = &ProjectStats{ProjectID: id, Counts: StateCounts{}, Recent: Throughput{Window: p.Window}}
	}
	counts, err := s.ProjectStateCounts(ctx, projectIDs)
	if err != nil {
		return nil, err
	}
	for id, c := range counts {
		out[id].Counts = c
	}

	var audio []struct {
		ProjectID int64
		Total     int64
		Done      int64
		Active    int64
	}
	err = s.db.WithContext(ctx).Raw(`SELECT project_id,
			coalesce(sum(end_ms - start_ms), 0) AS total,
			coalesce(sum(end_ms - start_ms) FILTER (WHERE state IN ?), 0) AS done,
			coalesce(sum(end_ms - start_ms) FILTER (WHERE state IN ?), 0) AS active
		FROM lines WHERE project_id IN ? GROUP BY project_id`, doneStates, activeStates, projectIDs).Scan(&audio).Error
	if err != nil {
		return nil, fmt.Errorf("error summing project audio: %w", err)
	}
	for _, a := range audio {
		st := out[a.ProjectID]
		st.TotalAudioMs, st.DoneAudioMs, st.ActiveAudioMs = a.Total, a.Done, a.Active
	}

	var reviewed []struct {
		ProjectID int64
		Approved  int
		Reviewed  int
	}
	err = s.db.WithContext(ctx).Raw(`SELECT l.project_id,
			count(*) FILTER (WHERE l.approved_take_id IS NOT NULL) AS approved,
			count(*) FILTER (WHERE EXISTS (SELECT 1 FROM take_reviews r WHERE r.line_id = l.id)) AS reviewed
		FROM lines l WHERE l.project_id IN ? GROUP BY l.project_id`, projectIDs).Scan(&reviewed).Error
	if err != nil {
		return nil, fmt.Errorf("error counting reviewed lines: %w", err)
	}
	for _, r := range reviewed {
		out[r.ProjectID].Approved, out[r.ProjectID].Reviewed = r.Approved, r.Reviewed
	}

	var recent []struct {
		ProjectID int64
		Takes     int
		AudioMs   int64
	}
	err = s.db.WithContext(ctx).Raw(`SELECT project_id, count(*) AS takes, coalesce(sum(duration_ms), 0) AS audio_ms
		FROM takes WHERE project_id IN ? AND created_at > ? AND created_at <= ? AND refit_of IS NULL
		GROUP BY project_id`, projectIDs, p.Now.Add(-p.Window), p.Now).Scan(&recent).Error
	if err != nil {
		return nil, fmt.Errorf("error measuring throughput: %w", err)
	}
	for _, r := range recent {
		out[r.ProjectID].Recent.Takes, out[r.ProjectID].Recent.AudioMs = r.Takes, r.AudioMs
	}
	return out, nil
}

// CharacterStats are one character's lines in a project. CharacterID is nil for the
// lines nobody speaks yet.
type CharacterStats struct {
	CharacterID  *int64
	Name         string
	Color        string
	Counts       StateCounts
	TotalAudioMs int64
	DoneAudioMs  int64
}

// CharacterStats returns a project's line counts by character and state, characters
// by name, lines without a character last. Characters without lines are left out.
func (s *Store) CharacterStats(ctx context.Context, projectID int64) ([]CharacterStats, error) {
	var rows []struct {
		CharacterID *int64
		Name        *string
		Color       *string
		State       LineState
		N           int
		AudioMs     int64
	}
	err := s.db.WithContext(ctx).Raw(`SELECT l.character_id, c.name, c.color, l.state, count(*) AS n,
			coalesce(sum(l.end_ms - l.start_ms), 0) AS audio_ms
		FROM lines l LEFT JOIN characters c ON c.id = l.character_id
		WHERE l.project_id = ?
		GROUP BY l.character_id, c.name, c.color, l.state
		ORDER BY c.name IS NULL, lower(c.name), l.character_id, l.state`, projectID).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("error counting lines by character: %w", err)
	}
	var out []CharacterStats
	for _, r := range rows {
		if len(out) == 0 || !eqID(out[len(out)-1].CharacterID, r.CharacterID) {
			cs := CharacterStats{CharacterID: r.CharacterID, Counts: StateCounts{}}
			if r.Name != nil {
				cs.Name = *r.Name
			}
			if r.Color != nil {
				cs.Color = *r.Color
			}
			out = append(out, cs)
		}
		cs := &out[len(out)-1]
		cs.Counts[r.State] += r.N
		cs.TotalAudioMs += r.AudioMs
		if r.State.Rendered() {
			cs.DoneAudioMs += r.AudioMs
		}
	}
	return out, nil
}

// FailedLine is a line whose render failed, with what a person needs to act on it.
type FailedLine struct {
	LineID         int64
	Idx            int
	Text           string
	LastError      string // as stored: a catalog message in JSON, or plain text
	Attempts       int
	CharacterID    *int64
	CharacterName  string
	CharacterColor string
	FailedAt       time.Time
}

// FailedLines returns up to limit failed lines of a project, the latest failure first.
func (s *Store) FailedLines(ctx context.Context, projectID int64, limit int) ([]FailedLine, error) {
	if limit <= 0 {
		limit = 50
	}
	var rows []struct {
		LineID         int64
		Idx            int
		Text           string
		LastError      string
		Attempts       int
		CharacterID    *int64
		CharacterName  *string
		CharacterColor *string
		FailedAt       time.Time
	}
	err := s.db.WithContext(ctx).Raw(`SELECT l.id AS line_id, l.idx, l.text, l.last_error, l.attempts, l.character_id,
			c.name AS character_name, c.color AS character_color, l.state_changed_at AS failed_at
		FROM lines l LEFT JOIN characters c ON c.id = l.character_id
		WHERE l.project_id = ? AND l.state = ?
		ORDER BY l.state_changed_at DESC, l.id DESC LIMIT ?`, projectID, StateFailed, limit).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("error listing failed lines: %w", err)
	}
	out := make([]FailedLine, len(rows))
	for i, r := range rows {
		out[i] = FailedLine{LineID: r.LineID, Idx: r.Idx, Text: r.Text, LastError: r.LastError, Attempts: r.Attempts,
			CharacterID: r.CharacterID, FailedAt: r.FailedAt}
		if r.CharacterName != nil {
			out[i].CharacterName = *r.CharacterName
		}
		if r.CharacterColor != nil {
			out[i].CharacterColor = *r.CharacterColor
		}
	}
	return out, nil
}

// ThroughputPoint is what was rendered in one minute.
type ThroughputPoint struct {
	Minute  time.Time // the minute's start
	Takes   int
	AudioMs int64
}

// ThroughputByMinute returns one point per minute of the window ending at p.Now
// (the minute in progress last), oldest first, minutes without takes included.
func (s *Store) ThroughputByMinute(ctx context.Context, projectID int64, p DashboardParams) ([]ThroughputPoint, error) {
	p, err := s.withDefaults(ctx, p)
	if err != nil {
		return nil, err
	}
	last := p.Now.Truncate(time.Minute)
	n := max(1, int(p.Window/time.Minute))
	first := last.Add(-time.Duration(n-1) * time.Minute)
	var rows []struct {
		Minute  int64 // Unix minute
		Takes   int
		AudioMs int64
	}
	err = s.db.WithContext(ctx).Raw(`SELECT floor(extract(epoch FROM created_at) / 60)::bigint AS minute,
			count(*) AS takes, coalesce(sum(duration_ms), 0) AS audio_ms
		FROM takes WHERE project_id = ? AND created_at >= ? AND created_at <= ? AND refit_of IS NULL
		GROUP BY 1`, projectID, first, p.Now).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("error measuring throughput by minute: %w", err)
	}
	out := make([]ThroughputPoint, n)
	for i := range out {
		out[i].Minute = first.Add(time.Duration(i) * time.Minute)
	}
	base := first.Unix() / 60
	for _, r := range rows {
		if i := r.Minute - base; i >= 0 && i < int64(n) {
			out[i].Takes, out[i].AudioMs = r.Takes, r.AudioMs
		}
	}
	return out, nil
}
