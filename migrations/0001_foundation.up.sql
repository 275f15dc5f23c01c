-- Foundation: users, sessions, projects, characters, lines and their history.

CREATE TABLE users (
    id            bigserial PRIMARY KEY,
    username      text NOT NULL,
    display_name  text NOT NULL DEFAULT '',
    role          text NOT NULL CHECK (role IN ('admin', 'manager', 'editor')),
    password_hash text NOT NULL,
    lang          text NOT NULL DEFAULT '' CHECK (lang IN ('', 'en', 'zh')),
    disabled      boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_username_key ON users (lower(username));

CREATE TABLE sessions (
    id           text PRIMARY KEY, -- SHA-256 of the cookie token, never the token itself
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);

CREATE TABLE login_failures (
    id         bigserial PRIMARY KEY,
    username   text NOT NULL,
    remote_ip  text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_lookup_idx ON login_failures (lower(username), remote_ip, created_at);

-- Audio blobs are stored content-addressed under DATA_DIR/blobs/ab/abcdef...; this row
-- records what probing found.
CREATE TABLE blobs (
    sha256      text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size_bytes  bigint NOT NULL,
    format      text NOT NULL,
    duration_ms integer NOT NULL,
    sample_rate integer NOT NULL,
    channels    integer NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE projects (
    id                bigserial PRIMARY KEY,
    name              text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    archived_at       timestamptz,
    created_by        bigint REFERENCES users (id) ON DELETE SET NULL,
    -- Duration lock limits (see the engines issue): stretch ratio bounds, how much of
    -- the following gap a line may borrow, loudness target and neighbour speed step.
    stretch_min       double precision NOT NULL DEFAULT 0.85,
    stretch_max       double precision NOT NULL DEFAULT 1.25,
    gap_borrow_ms     integer NOT NULL DEFAULT 300,
    loudness_lufs     double precision NOT NULL DEFAULT -23,
    max_speed_step    double precision NOT NULL DEFAULT 0.15,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE characters (
    id               bigserial PRIMARY KEY,
    project_id       bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    color            text NOT NULL DEFAULT '#4f6bed' CHECK (color ~ '^#[0-9a-f]{6}$'),
    ref_audio_sha256 text REFERENCES blobs (sha256),
    ref_audio_name   text NOT NULL DEFAULT '',
    emotion          jsonb NOT NULL DEFAULT '{"mode":"speaker"}',
    preview_voice    text NOT NULL DEFAULT 'en',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX characters_project_name_key ON characters (project_id, lower(name));

CREATE TABLE lines (
    id            bigserial PRIMARY KEY,
    project_id    bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    idx           integer NOT NULL,
    start_ms      integer NOT NULL CHECK (start_ms >= 0),
    end_ms        integer NOT NULL CHECK (end_ms >= 0),
    text          text NOT NULL DEFAULT '',
    character_id  bigint REFERENCES characters (id) ON DELETE SET NULL,
    emotion       jsonb, -- NULL: the character's default
    notes         text NOT NULL DEFAULT '',
    duration_lock boolean NOT NULL DEFAULT true,
    revision      integer NOT NULL DEFAULT 1,
    state         text NOT NULL DEFAULT 'draft' CHECK (state IN (
                    'draft', 'queued', 'waiting_gpu', 'synthesizing', 'fitting',
                    'done', 'needs_review', 'failed', 'cancelled')),
    flags         text[] NOT NULL DEFAULT '{}', -- import findings: overlap, zero_length
    updated_by    bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT lines_project_idx_key UNIQUE (project_id, idx) DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX lines_project_state_idx ON lines (project_id, state);
CREATE INDEX lines_project_character_idx ON lines (project_id, character_id);

CREATE TABLE line_history (
    id         bigserial PRIMARY KEY,
    line_id    bigint NOT NULL REFERENCES lines (id) ON DELETE CASCADE,
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    user_id    bigint REFERENCES users (id) ON DELETE SET NULL,
    action     text NOT NULL,
    before     jsonb,
    after      jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX line_history_line_idx ON line_history (line_id, id);

CREATE TABLE app_settings (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
