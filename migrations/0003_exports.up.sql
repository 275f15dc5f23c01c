-- Exports: a job per request, with progress and the finished archive.
CREATE TABLE exports (
    id          bigserial PRIMARY KEY,
    project_id  bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    approved_only boolean NOT NULL DEFAULT true,
    state       text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    progress    integer NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    lines       integer NOT NULL DEFAULT 0,
    file_name   text NOT NULL DEFAULT '',
    size_bytes  bigint NOT NULL DEFAULT 0,
    error       text NOT NULL DEFAULT '',
    created_by  bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX exports_project_idx ON exports (project_id, id DESC);
