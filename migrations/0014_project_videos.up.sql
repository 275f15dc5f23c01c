-- Picture: a project's source video, kept as a blob beside its extracted sound track
-- (project_sources), and its browser-ready proxy (H.264/AAC in MP4, made by a
-- make_proxy job), with the job's progress. A new upload replaces the row; a job for
-- an earlier video finds video_sha256 changed and writes nothing.
CREATE TABLE project_videos (
    project_id   bigint PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    video_sha256 text NOT NULL REFERENCES blobs (sha256),
    file_name    text NOT NULL DEFAULT '',                -- shown only, never a path
    duration_ms  integer NOT NULL CHECK (duration_ms >= 0),
    width        integer NOT NULL CHECK (width >= 0),
    height       integer NOT NULL CHECK (height >= 0),
    proxy_sha256 text REFERENCES blobs (sha256),
    state        text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    progress     integer NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    error        text NOT NULL DEFAULT '',
    attempts     integer NOT NULL DEFAULT 0,
    uploaded_by  bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    CHECK (state <> 'done' OR proxy_sha256 IS NOT NULL)
);

-- A project's language (issue 18 item 7): the espeak-ng voice new characters get for
-- the CPU preview; '' leaves it to a guess from the line's text, as before.
ALTER TABLE projects ADD COLUMN language text NOT NULL DEFAULT '';
