-- The music-and-effects bed (issue 18 item 4): one per project, an M&E track (kind
-- 'me') or a full mix whose own dialogue is ducked under the dub (kind 'full_mix').
-- Its sound is kept as a 48 kHz WAV blob, extracted as a source's is. A new upload
-- replaces the row; removing the bed deletes it (the blob stays, as a source's does).
CREATE TABLE project_beds (
    project_id   bigint PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    audio_sha256 text NOT NULL REFERENCES blobs (sha256),
    kind         text NOT NULL DEFAULT 'me' CHECK (kind IN ('me', 'full_mix')),
    file_name    text NOT NULL DEFAULT '',                -- shown only, never a path
    duration_ms  integer NOT NULL CHECK (duration_ms >= 0),
    channels     integer NOT NULL CHECK (channels BETWEEN 1 AND 2),
    uploaded_by  bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- The bed's blob belongs to its project (GET /blobs/SHA, the blob GC), as a source's.
CREATE FUNCTION project_blobs_from_bed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM project_blobs_link(NEW.project_id, ARRAY[NEW.audio_sha256]);
    RETURN NULL;
END $$;
CREATE TRIGGER project_beds_project_blobs AFTER INSERT OR UPDATE OF audio_sha256 ON project_beds
    FOR EACH ROW EXECUTE FUNCTION project_blobs_from_bed();

-- An export's option: a full mix of the dialogue over the ducked bed, loudness
-- normalised (docs/exports.md). The bed's own stem goes in whenever there is a bed.
ALTER TABLE exports ADD COLUMN bed_mix boolean NOT NULL DEFAULT false;
