-- The blob garbage collector's runs (studio.Store.CollectBlobs, the collect_blobs
-- periodic job): what each removed and kept, for the admin's workers page. The
-- design (grace period, row locks, tombstones) is in docs/limits.md.
CREATE TABLE blob_gc_runs (
    id            bigserial PRIMARY KEY,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz NOT NULL DEFAULT now(),
    interval_ms   bigint NOT NULL CHECK (interval_ms >= 0), -- BLOB_GC_INTERVAL when it ran
    grace_ms      bigint NOT NULL CHECK (grace_ms >= 0),    -- BLOB_GC_GRACE when it ran
    removed_blobs integer NOT NULL DEFAULT 0,
    removed_bytes bigint NOT NULL DEFAULT 0,
    missing_files integer NOT NULL DEFAULT 0, -- rows removed whose file was already gone
    kept_blobs    integer NOT NULL DEFAULT 0,
    kept_bytes    bigint NOT NULL DEFAULT 0,
    error         text NOT NULL DEFAULT ''
);
CREATE INDEX blob_gc_runs_finished_idx ON blob_gc_runs (finished_at DESC);

-- What the checks of a character's reference voice found that makes a bad clone
-- (media.CheckVoice: clipping, a high noise floor), shown on the character's card:
-- [{"key": "voice.clipped", "args": ["1.2"]}, ...]. A refused voice is never stored.
ALTER TABLE characters ADD COLUMN ref_warnings jsonb; -- NULL: none
