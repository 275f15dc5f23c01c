-- Render pipeline: takes, per-line render bookkeeping, speaker conditioning caches,
-- registered workers.

ALTER TABLE lines
    ADD COLUMN render_seq      integer NOT NULL DEFAULT 0,  -- bumped by every render request and audible edit
    ADD COLUMN attempts        integer NOT NULL DEFAULT 0,
    ADD COLUMN last_error      text NOT NULL DEFAULT '',
    ADD COLUMN last_traceback  text NOT NULL DEFAULT '',
    ADD COLUMN job_id          bigint,                      -- River job of the current render
    ADD COLUMN current_take_id bigint,
    ADD COLUMN approved_take_id bigint,
    ADD COLUMN state_changed_at timestamptz NOT NULL DEFAULT now();

CREATE TABLE takes (
    id              bigserial PRIMARY KEY,
    line_id         bigint NOT NULL REFERENCES lines (id) ON DELETE CASCADE,
    project_id      bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    revision        integer NOT NULL,
    render_seq      integer NOT NULL,
    engine          text NOT NULL,
    model_version   text NOT NULL DEFAULT '',
    gpu             text NOT NULL DEFAULT '',
    worker          text NOT NULL DEFAULT '',
    seed            bigint NOT NULL DEFAULT 0,
    spoken_text     text NOT NULL,
    peak_vram_bytes bigint NOT NULL DEFAULT 0,
    synth_ms        integer NOT NULL DEFAULT 0,
    fit_ms          integer NOT NULL DEFAULT 0,
    audio_ms        integer NOT NULL DEFAULT 0, -- natural length as synthesized
    duration_ms     integer NOT NULL DEFAULT 0, -- length after the duration lock
    rtf             double precision NOT NULL DEFAULT 0,
    stretch_ratio   double precision NOT NULL DEFAULT 1,
    needed_ratio    double precision NOT NULL DEFAULT 1,
    borrowed_ms     integer NOT NULL DEFAULT 0,
    loudness_lufs   double precision NOT NULL DEFAULT 0,
    needs_review    boolean NOT NULL DEFAULT false,
    hint            jsonb,
    audio_sha256    text NOT NULL REFERENCES blobs (sha256), -- after the duration lock
    raw_sha256      text REFERENCES blobs (sha256),          -- as the engine made it
    approved_at     timestamptz,
    approved_by     bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- One take per render: a retried or rescued job cannot add a second.
    CONSTRAINT takes_render_key UNIQUE (line_id, render_seq)
);
CREATE INDEX takes_project_created_idx ON takes (project_id, created_at);

ALTER TABLE lines
    ADD CONSTRAINT lines_current_take_fk FOREIGN KEY (current_take_id) REFERENCES takes (id) ON DELETE SET NULL,
    ADD CONSTRAINT lines_approved_take_fk FOREIGN KEY (approved_take_id) REFERENCES takes (id) ON DELETE SET NULL;

-- A speaker's conditioning, computed once per reference audio and model version.
CREATE TABLE speaker_conditioning (
    ref_sha256    text NOT NULL REFERENCES blobs (sha256),
    model_version text NOT NULL,
    cache_path    text NOT NULL,
    worker        text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ref_sha256, model_version)
);

CREATE TABLE workers (
    name         text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    engines      text[] NOT NULL DEFAULT '{}',
    gpus         jsonb NOT NULL DEFAULT '[]',
    slots        integer NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- Live status: every change to a line is announced on the channel dubstudio_lines,
-- delivered when its transaction commits. Row updates name the line; inserts and
-- deletes (imports, splits, merges) ask listeners to reload the project.
CREATE FUNCTION notify_line_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('dubstudio_lines', json_build_object(
        'p', NEW.project_id, 'l', NEW.id, 's', NEW.state, 'r', NEW.revision)::text);
    RETURN NULL;
END $$;

CREATE TRIGGER lines_notify_update AFTER UPDATE ON lines
    FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW) EXECUTE FUNCTION notify_line_update();

CREATE FUNCTION notify_lines_reload() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE pid bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        FOR pid IN SELECT DISTINCT project_id FROM new_rows LOOP
            PERFORM pg_notify('dubstudio_lines', json_build_object('p', pid, 'all', true)::text);
        END LOOP;
    ELSE
        FOR pid IN SELECT DISTINCT project_id FROM old_rows LOOP
            PERFORM pg_notify('dubstudio_lines', json_build_object('p', pid, 'all', true)::text);
        END LOOP;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER lines_notify_insert AFTER INSERT ON lines
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION notify_lines_reload();
CREATE TRIGGER lines_notify_delete AFTER DELETE ON lines
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION notify_lines_reload();

-- Per-project pronunciation glossary, applied to the text sent to the engines.
CREATE TABLE glossary (
    id         bigserial PRIMARY KEY,
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    term       text NOT NULL,
    spoken     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, term)
);
