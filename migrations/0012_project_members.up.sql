-- Project membership: managers and admins see every project; an editor sees only the
-- projects they are a member of (studio.Store.ProjectFor, ProjectsOpts.MemberID).
CREATE TABLE project_members (
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    added_by   bigint REFERENCES users (id) ON DELETE SET NULL,
    added_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project_id, user_id)
);
-- An editor's project list.
CREATE INDEX project_members_user_idx ON project_members (user_id, project_id);

-- Who added or removed whom, and when: the rows of project_members say who is a member
-- now, this says how that came to be.
CREATE TABLE project_member_history (
    id         bigserial PRIMARY KEY,
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    user_id    bigint REFERENCES users (id) ON DELETE SET NULL,
    action     text NOT NULL CHECK (action IN ('add', 'remove')),
    by_user    bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX project_member_history_project_idx ON project_member_history (project_id, id DESC);

-- Until now every editor worked on every project. The upgrade keeps each project's
-- creator and everyone who changed one of its lines; managers add the others.
INSERT INTO project_members (project_id, user_id, added_by, added_at)
SELECT id, created_by, created_by, created_at FROM projects WHERE created_by IS NOT NULL
UNION
SELECT DISTINCT h.project_id, h.user_id, NULL::bigint, now() FROM line_history h WHERE h.user_id IS NOT NULL
ON CONFLICT DO NOTHING;

-- Which projects a blob belongs to (a take's audio, as fitted or as synthesized, a
-- character's reference voice or emotion audio, a project's source, a played range),
-- so that GET /blobs/SHA asks one primary-key lookup whether the user may hear it.
-- Rows are added by the triggers below (and by Store.LinkProjectBlob for derived audio)
-- and never removed while the project and the blob exist: who could hear a blob once
-- may hear it again.
CREATE TABLE project_blobs (
    sha256     text NOT NULL REFERENCES blobs (sha256) ON DELETE CASCADE,
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    PRIMARY KEY (sha256, project_id)
);
CREATE INDEX project_blobs_project_idx ON project_blobs (project_id);

CREATE FUNCTION project_blobs_link(project bigint, shas text[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO project_blobs (sha256, project_id)
    SELECT b.sha256, project FROM blobs b WHERE b.sha256 = ANY (shas)
    ON CONFLICT DO NOTHING
$$;

CREATE FUNCTION project_blobs_from_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM project_blobs_link(NEW.project_id, ARRAY[NEW.audio_sha256, NEW.raw_sha256]);
    RETURN NULL;
END $$;
CREATE TRIGGER takes_project_blobs AFTER INSERT OR UPDATE OF audio_sha256, raw_sha256 ON takes
    FOR EACH ROW EXECUTE FUNCTION project_blobs_from_take();

CREATE FUNCTION project_blobs_from_character() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM project_blobs_link(NEW.project_id, ARRAY[NEW.ref_audio_sha256, NEW.emotion ->> 'audio_sha256']);
    RETURN NULL;
END $$;
CREATE TRIGGER characters_project_blobs AFTER INSERT OR UPDATE OF ref_audio_sha256, emotion ON characters
    FOR EACH ROW EXECUTE FUNCTION project_blobs_from_character();

CREATE FUNCTION project_blobs_from_source() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM project_blobs_link(NEW.project_id, ARRAY[NEW.audio_sha256]);
    RETURN NULL;
END $$;
CREATE TRIGGER project_sources_project_blobs AFTER INSERT OR UPDATE OF audio_sha256 ON project_sources
    FOR EACH ROW EXECUTE FUNCTION project_blobs_from_source();

INSERT INTO project_blobs (sha256, project_id)
SELECT s, project_id FROM (
    SELECT project_id, audio_sha256 AS s FROM takes
    UNION SELECT project_id, raw_sha256 FROM takes
    UNION SELECT project_id, ref_audio_sha256 FROM characters
    UNION SELECT project_id, emotion ->> 'audio_sha256' FROM characters
    UNION SELECT project_id, audio_sha256 FROM project_sources
) x
WHERE s IN (SELECT sha256 FROM blobs)
ON CONFLICT DO NOTHING;
