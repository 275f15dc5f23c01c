-- Review: what editors say and do about takes (comments, approvals, going back,
-- regenerating; who and when), the project's source audio (the original
-- performance), and audio derived from blobs (segments of the source, assembled
-- ranges of lines) cached by a key that names what it was made from.
CREATE TABLE take_reviews (
    id         bigserial PRIMARY KEY,
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    line_id    bigint NOT NULL REFERENCES lines (id) ON DELETE CASCADE,
    take_id    bigint REFERENCES takes (id) ON DELETE CASCADE,
    user_id    bigint REFERENCES users (id) ON DELETE SET NULL,
    action     text NOT NULL CHECK (action IN ('comment', 'approve', 'use', 'regenerate')),
    body       text NOT NULL DEFAULT '' CHECK (length(body) <= 2000),
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (action = 'regenerate' OR take_id IS NOT NULL),
    CHECK (action <> 'comment' OR length(btrim(body)) > 0)
);
CREATE INDEX take_reviews_line_idx ON take_reviews (line_id, id);

CREATE TABLE project_sources (
    project_id   bigint PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    audio_sha256 text NOT NULL REFERENCES blobs (sha256), -- 48 kHz 16-bit WAV
    file_name    text NOT NULL DEFAULT '',                -- shown only, never a path
    duration_ms  integer NOT NULL CHECK (duration_ms >= 0),
    channels     integer NOT NULL CHECK (channels BETWEEN 1 AND 2),
    uploaded_by  bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE derived_audio (
    key        text PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 200),
    sha256     text NOT NULL REFERENCES blobs (sha256),
    created_at timestamptz NOT NULL DEFAULT now()
);
