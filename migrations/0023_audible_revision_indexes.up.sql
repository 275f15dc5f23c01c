-- 0015 backfilled lines.audible_revision with the revision, so a line edited before
-- it, even in its notes only, counted every edit as audible and its older takes as
-- stale. Recomputed here from line_history, as studio.Audible decides: the revision of
-- the line's last change to anything of its snapshot but its notes (text, character,
-- emotion, slot, duration lock). A line's creation (an import, the second half of a
-- split: no "before") leaves it at 0, as the store does. Every change bumps the
-- revision once and writes one history row, so the n-th row from the newest is
-- revision (revision - n + 1). Lines without history keep what they have.
WITH changes AS (
    SELECT h.line_id,
           l.revision - row_number() OVER (PARTITION BY h.line_id ORDER BY h.id DESC) + 1 AS revision,
           h.before IS NOT NULL AND h.after IS NOT NULL
               AND (h.before - 'notes') IS DISTINCT FROM (h.after - 'notes') AS audible
    FROM line_history h
    JOIN lines l ON l.id = h.line_id
),
last_audible AS (
    SELECT line_id, greatest(coalesce(max(revision) FILTER (WHERE audible), 0), 0) AS revision
    FROM changes
    GROUP BY line_id
)
UPDATE lines l SET audible_revision = a.revision
FROM last_audible a
WHERE a.line_id = l.id AND l.audible_revision <> a.revision;

-- A profile's beams: 0 is the default (gpu.Profile.BeamsOrDefault, IndexTTS's 3), as
-- 0010 says; the column's default was a second form of it, the literal 3.
ALTER TABLE gpu_profiles ALTER COLUMN beams SET DEFAULT 0;

-- Deleting a user sets these columns of 0012's tables to NULL: without an index each
-- deletion scanned the tables.
CREATE INDEX project_members_added_by_idx ON project_members (added_by);
CREATE INDEX project_member_history_user_idx ON project_member_history (user_id);
CREATE INDEX project_member_history_by_user_idx ON project_member_history (by_user);
