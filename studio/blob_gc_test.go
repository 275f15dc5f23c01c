package studio_test

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

type gcBundle struct {
	store *studio.Store
	bs    studio.BlobStore
	p     *studio.Project
}

func setupGC(t *testing.T) *gcBundle {
	t.Helper()
	s := studiotest.Store(t)
	u := studiotest.User(t, s, studio.RoleEditor)
	return &gcBundle{store: s, bs: studio.BlobStore{Dir: t.TempDir()}, p: studiotest.Project(t, s, u, 2)}
}

// old stores content as a blob whose row and file are two days old.
func (b *gcBundle) old(t *testing.T, content string) *studio.Blob {
	t.Helper()
	blob := putBlob(t, b.store, b.bs, content)
	studiotest.Exec(t, b.store, `UPDATE blobs SET created_at = now() - interval '48 hours' WHERE sha256 = $1`, blob.SHA256)
	p, err := b.bs.Path(blob.SHA256)
	require.NoError(t, err)
	then := time.Now().Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(p, then, then))
	return blob
}

// exists reports whether the blob's row and its file are there.
func (b *gcBundle) exists(t *testing.T, sum string) (row, file bool) {
	t.Helper()
	_, err := b.store.Blob(context.Background(), sum)
	row = err == nil
	p, perr := b.bs.Path(sum)
	require.NoError(t, perr)
	_, ferr := os.Stat(p)
	return row, ferr == nil
}

func (b *gcBundle) collect(t *testing.T) *studio.BlobGCRun {
	t.Helper()
	run, err := b.store.CollectBlobs(context.Background(), b.bs, studio.BlobGCOpts{Grace: 24 * time.Hour, Interval: 6 * time.Hour, Batch: 2})
	require.NoError(t, err)
	return run
}

// TestBlobForeignKeysMatchCatalog fails when the schema gains a foreign key to blobs
// that the collector does not know: it would either keep nothing alive through it
// (deleting users' audio) or fail on it.
func TestBlobForeignKeysMatchCatalog(t *testing.T) {
	t.Parallel()
	s := studiotest.Store(t)
	rows, err := s.Pool().Query(context.Background(), `SELECT c.conrelid::regclass::text, a.attname
		FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
		WHERE c.contype = 'f' AND c.confrelid = 'blobs'::regclass`)
	require.NoError(t, err)
	var catalog []string
	for rows.Next() {
		var table, column string
		require.NoError(t, rows.Scan(&table, &column))
		catalog = append(catalog, table+"."+column)
	}
	require.NoError(t, rows.Err())
	var known []string
	for _, r := range studio.BlobForeignKeys {
		known = append(known, r.Table+"."+r.Column)
	}
	sort.Strings(catalog)
	sort.Strings(known)
	require.NotEmpty(t, catalog)
	require.Equal(t, catalog, known, "studio.BlobForeignKeys must list every foreign key to blobs")
}

func TestCollectBlobsRemovesOnlyUnreferencedOldBlobs(t *testing.T) {
	t.Parallel()
	b := setupGC(t)
	ctx := context.Background()
	gone := b.old(t, "nobody refers to this")
	cached := b.old(t, "only a derived audio cache refers to this")
	studiotest.Exec(t, b.store, `INSERT INTO derived_audio (key, sha256) VALUES ('segment:x', $1)`, cached.SHA256)
	voice := b.old(t, "a character's reference voice")
	c, err := b.store.CreateCharacter(ctx, b.p.ID, studio.CharacterParams{Name: "Ann", Color: "#336699", Emotion: studio.Emotion{Mode: studio.EmotionSpeaker}, PreviewVoice: "en"})
	require.NoError(t, err)
	require.NoError(t, b.store.SetCharacterReference(ctx, b.p.ID, c.ID, voice.SHA256, "ann.wav"))
	emotion := b.old(t, "a line's emotion audio, no foreign key")
	studiotest.Exec(t, b.store, `UPDATE lines SET emotion = jsonb_build_object('mode', 'audio', 'audio_sha256', $1::text)
		WHERE id = (SELECT min(id) FROM lines WHERE project_id = $2)`, emotion.SHA256, b.p.ID)
	history := b.old(t, "an emotion only the line history remembers")
	studiotest.Exec(t, b.store, `INSERT INTO line_history (line_id, project_id, action, before)
		SELECT min(id), $2, 'edit', jsonb_build_object('emotion', jsonb_build_object('audio_sha256', $1::text))
		FROM lines WHERE project_id = $2`, history.SHA256, b.p.ID)
	raw := b.old(t, "a raw take a waiting fit job will read")
	studiotest.Exec(t, b.store, `INSERT INTO river_job (args, kind, max_attempts, queue, state)
		VALUES (jsonb_build_object('raw_sha256', $1::text), 'fit_line', 5, 'fit', 'available')`, raw.SHA256)
	young := putBlob(t, b.store, b.bs, "stored a minute ago, not yet named")

	run := b.collect(t)
	require.Equal(t, 2, run.RemovedBlobs, "the unreferenced blob and the cached one")
	require.Equal(t, gone.SizeBytes+cached.SizeBytes, run.RemovedBytes)
	for _, sum := range []string{gone.SHA256, cached.SHA256} {
		row, file := b.exists(t, sum)
		require.False(t, row, "row of %s", sum)
		require.False(t, file, "file of %s", sum)
	}
	for name, blob := range map[string]*studio.Blob{"voice": voice, "emotion": emotion, "history": history, "raw": raw, "young": young} {
		row, file := b.exists(t, blob.SHA256)
		require.True(t, row && file, "the %s blob must be kept", name)
	}
	require.Equal(t, 5, run.KeptBlobs)
	require.Equal(t, voice.SizeBytes+emotion.SizeBytes+history.SizeBytes+raw.SizeBytes+young.SizeBytes, run.KeptBytes)

	last, err := b.store.LastBlobGCRun(ctx)
	require.NoError(t, err)
	require.Equal(t, run.ID, last.ID)
	require.Equal(t, 2, last.RemovedBlobs)
	require.Equal(t, 6*time.Hour, last.NextAt().Sub(last.StartedAt))

	// The project's deletion frees the voice and the emotion audio: the next run takes them.
	require.NoError(t, b.store.DeleteCharacter(ctx, b.p.ID, c.ID))
	again := b.collect(t)
	require.Equal(t, 1, again.RemovedBlobs, "the voice, now unreferenced")
	row, file := b.exists(t, voice.SHA256)
	require.False(t, row || file)
}

// TestCollectBlobsKeepsWhatIsReusedDuringTheRun re-uses old, unreferenced blobs while
// the collector holds them locked, as an upload of the same file and a line edit
// would: neither may lose its audio.
func TestCollectBlobsKeepsWhatIsReusedDuringTheRun(t *testing.T) {
	t.Parallel()
	b := setupGC(t)
	ctx := context.Background()
	reuploaded := b.old(t, "uploaded again while the collector runs")
	renamed := b.old(t, "named by a line while the collector runs")
	gone := b.old(t, "nobody comes back for this one")
	studio.SetBlobGCLocked(b.store, func(sums []string) {
		// Another connection: the collector's transaction is open.
		putBlob(t, b.store, b.bs, "uploaded again while the collector runs")
		_, err := b.store.Pool().Exec(ctx, `UPDATE lines SET emotion = jsonb_build_object('mode', 'audio', 'audio_sha256', $1::text)
			WHERE id = (SELECT min(id) FROM lines WHERE project_id = $2)`, renamed.SHA256, b.p.ID)
		require.NoError(t, err)
	})
	run := b.collect(t)
	studio.SetBlobGCLocked(b.store, nil)
	require.Equal(t, 1, run.RemovedBlobs)
	for _, sum := range []string{reuploaded.SHA256, renamed.SHA256} {
		row, file := b.exists(t, sum)
		require.True(t, row && file, "blob %s re-used during the run must be kept, row and file", sum)
	}
	row, file := b.exists(t, gone.SHA256)
	require.False(t, row || file)
}

// TestCollectBlobsSkipsABlobBeingReferenced: a transaction that is inserting a
// foreign key to an old blob holds its row; the collector passes it by, and it is
// kept once that transaction commits.
func TestCollectBlobsSkipsABlobBeingReferenced(t *testing.T) {
	t.Parallel()
	b := setupGC(t)
	ctx := context.Background()
	voice := b.old(t, "a reference voice chosen again")
	c, err := b.store.CreateCharacter(ctx, b.p.ID, studio.CharacterParams{Name: "Bo", Color: "#336699", Emotion: studio.Emotion{Mode: studio.EmotionSpeaker}, PreviewVoice: "en"})
	require.NoError(t, err)
	tx, err := b.store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) // committed below
	_, err = tx.Exec(ctx, `UPDATE characters SET ref_audio_sha256 = $1 WHERE id = $2`, voice.SHA256, c.ID)
	require.NoError(t, err)
	run := b.collect(t)
	require.Zero(t, run.RemovedBlobs, "%+v", run)
	require.NoError(t, tx.Commit(ctx))
	row, file := b.exists(t, voice.SHA256)
	require.True(t, row && file)
	require.Zero(t, b.collect(t).RemovedBlobs, "referenced now")
}
