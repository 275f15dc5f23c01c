// Package studiotest builds fixtures for tests: a store on a fresh database, users,
// projects, characters and lines.
package studiotest

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"dubstudio/audio"

	"dubstudio/internal/testdb"
	"dubstudio/studio"
)

// Store returns a store on a fresh migrated database.
func Store(t testing.TB) *studio.Store {
	t.Helper()
	s, err := studio.NewStore(testdb.Pool(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var seq atomic.Int64

// Password is the password of every user made here.
const Password = "correct-horse-battery"

// User creates a user with role.
func User(t testing.TB, s *studio.Store, role studio.Role) *studio.User {
	t.Helper()
	u, err := s.CreateUser(context.Background(), studio.CreateUserParams{
		Username: fmt.Sprintf("%s%d", role, seq.Add(1)), Role: role, Password: Password,
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Project creates a project with n lines spoken by two characters, one second each.
func Project(t testing.TB, s *studio.Store, owner *studio.User, n int) *studio.Project {
	t.Helper()
	ctx := context.Background()
	p, err := s.CreateProject(ctx, fmt.Sprintf("Project %d", seq.Add(1)), &owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return p
	}
	lines := make([]studio.NewLine, n)
	for i := range lines {
		who := "Alice"
		if i%2 == 1 {
			who = "Bob"
		}
		lines[i] = studio.NewLine{SourceLine: i + 1, StartMs: i * 2000, EndMs: i*2000 + 1500, CharacterName: who,
			Text: fmt.Sprintf("Line number %d, said with \"quotes\" & <brackets>.", i+1)}
	}
	if _, err := s.ImportLines(ctx, owner.ID, p.ID, lines); err != nil {
		t.Fatal(err)
	}
	return p
}

// StoreWithURL returns a store on a fresh migrated database and the database's URL,
// for tests that start other processes on it.
func StoreWithURL(t testing.TB) (*studio.Store, string) {
	t.Helper()
	url := testdb.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := studio.NewStore(pool)
	if err != nil {
		t.Fatal(err)
	}
	return s, url
}

// AdminConn connects to the test server's administrative database (to terminate
// backends, say).
func AdminConn(t testing.TB) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), testdb.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// Exec runs a statement on s's database with pgx ($1 placeholders), for a test
// that sets rows up as no store method would. It goes through the pool the store
// shares with River, not through the store: the store hands out no database handle.
func Exec(t testing.TB, s *studio.Store, sql string, args ...any) {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// WaitSettled waits until no line of the project is queued or running and returns its
// lines' states, failing the test if that does not happen within limit (a bound on a
// hang, not a timing claim). A failed read is tried again until then: tests that kill
// database connections or restart the server read through it.
func WaitSettled(t testing.TB, s *studio.Store, projectID int64, limit time.Duration) studio.StateCounts {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		counts, err := s.ProjectStateCounts(context.Background(), []int64{projectID})
		if err == nil {
			c := counts[projectID]
			active := 0
			for st, n := range c {
				if st.Active() {
					active += n
				}
			}
			if active == 0 {
				return c
			}
			err = fmt.Errorf("lines still active: %v", c)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Take records a take of line l, as a fit would: n samples of 48 kHz audio, silent for
// the first lead, then a tone at freq, written under scratch and stored in blobs. A
// line that has a take already gets the next render sequence number first.
func Take(t testing.TB, s *studio.Store, blobs studio.BlobStore, scratch string, l studio.Line, n, lead int, freq float64) *studio.Take {
	t.Helper()
	ctx := context.Background()
	pcm := audio.PCM{SampleRate: 48000, Channels: 1, Samples: make([]int16, n)}
	for k := lead; k < n; k++ {
		pcm.Samples[k] = int16(8000 * math.Sin(2*math.Pi*freq*float64(k)/48000))
	}
	path := filepath.Join(scratch, fmt.Sprintf("take-%d-%f.wav", l.ID, freq))
	must(t, audio.WriteWAVFile(path, pcm))
	blob, err := s.PutBlob(ctx, blobs, path, studio.Blob{Format: "wav", DurationMs: n * 1000 / 48000, SampleRate: 48000, Channels: 1})
	must(t, err)
	fresh, err := s.Line(ctx, l.ProjectID, l.ID)
	must(t, err)
	// The line is being fitted, as where a fit records its take (FinishRender stores
	// none on a line finished otherwise).
	bump := 0
	if fresh.CurrentTakeID != nil {
		bump = 1
	}
	Exec(t, s, `UPDATE lines SET render_seq = render_seq + $2, state = 'fitting' WHERE id = $1`, l.ID, bump)
	fresh, err = s.Line(ctx, l.ProjectID, l.ID)
	must(t, err)
	tk := &studio.Take{LineID: l.ID, ProjectID: l.ProjectID, Revision: fresh.Revision, RenderSeq: fresh.RenderSeq, Engine: "test",
		SpokenText: l.Text, DurationMs: n * 1000 / 48000, StretchRatio: 1, BorrowedMs: max(0, n*1000/48000-l.DurationMs()),
		AudioSHA256: blob.SHA256}
	ok, err := s.FinishRender(ctx, tk)
	must(t, err)
	if !ok {
		t.Fatalf("the take of line %d was not recorded", l.ID)
	}
	return tk
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
