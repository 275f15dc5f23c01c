-- GPUs: the concurrency profiles admins define and assign to GPUs by UUID, calibration
-- runs with their measurements, per-minute history of every GPU, and the live state
-- each worker publishes every few seconds for the admin page and /metrics.

CREATE TABLE gpu_profiles (
    id                      bigserial PRIMARY KEY,
    name                    text NOT NULL UNIQUE CHECK (name <> ''),
    max_slots               integer NOT NULL CHECK (max_slots >= 1),
    reserve_pct             double precision NOT NULL CHECK (reserve_pct >= 0 AND reserve_pct <= 90),
    long_text_threshold_sec double precision NOT NULL CHECK (long_text_threshold_sec > 0),
    long_lane_limit         integer NOT NULL CHECK (long_lane_limit >= 1 AND long_lane_limit <= max_slots),
    max_gen_seconds         double precision NOT NULL CHECK (max_gen_seconds > 0),
    segment_tokens          integer NOT NULL CHECK (segment_tokens > 0),
    fp16                    boolean NOT NULL DEFAULT true,
    emotion_text_model      boolean NOT NULL DEFAULT false,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    updated_by              bigint REFERENCES users (id) ON DELETE SET NULL
);

-- A calibration of one GPU with one profile: requested from the admin page (a worker
-- owning the GPU claims it) or stored by `dubstudio calibrate`. result holds the
-- measurements and the analysis as JSON (gpu/calibrate.Result).
CREATE TABLE gpu_calibrations (
    id           bigserial PRIMARY KEY,
    gpu_uuid     text NOT NULL,
    gpu_name     text NOT NULL DEFAULT '',
    worker       text NOT NULL DEFAULT '',
    profile_id   bigint REFERENCES gpu_profiles (id) ON DELETE SET NULL,
    profile      jsonb NOT NULL,           -- the profile as it was when calibrated
    status       text NOT NULL DEFAULT 'requested'
                 CHECK (status IN ('requested', 'running', 'done', 'failed', 'cancelled')),
    progress     text NOT NULL DEFAULT '',
    result       jsonb,
    error        text NOT NULL DEFAULT '',
    requested_by bigint REFERENCES users (id) ON DELETE SET NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz,
    applied_at   timestamptz,
    applied_by   bigint REFERENCES users (id) ON DELETE SET NULL
);
CREATE INDEX gpu_calibrations_gpu_idx ON gpu_calibrations (gpu_uuid, requested_at DESC);
-- One calibration at a time per GPU: it needs the card to itself.
CREATE UNIQUE INDEX gpu_calibrations_active_key ON gpu_calibrations (gpu_uuid)
    WHERE status IN ('requested', 'running');

-- Which profile (and which calibration's prediction curve) a GPU runs with. A GPU
-- without a row runs the default profile on the default curve.
CREATE TABLE gpu_assignments (
    gpu_uuid       text PRIMARY KEY,
    profile_id     bigint NOT NULL REFERENCES gpu_profiles (id) ON DELETE CASCADE,
    calibration_id bigint REFERENCES gpu_calibrations (id) ON DELETE SET NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    updated_by     bigint REFERENCES users (id) ON DELETE SET NULL
);

-- Per-minute averages and maxima of every GPU, per worker host.
CREATE TABLE gpu_history (
    host            text NOT NULL,
    gpu_uuid        text NOT NULL,
    minute          timestamptz NOT NULL,
    gpu_index       integer NOT NULL DEFAULT 0,
    samples         integer NOT NULL DEFAULT 0,
    lost            integer NOT NULL DEFAULT 0,
    avg_used_bytes  bigint NOT NULL DEFAULT 0,
    max_used_bytes  bigint NOT NULL DEFAULT 0,
    total_bytes     bigint NOT NULL DEFAULT 0,
    avg_util        real NOT NULL DEFAULT 0,
    max_util        integer NOT NULL DEFAULT 0,
    avg_temp_c      real NOT NULL DEFAULT 0,
    max_temp_c      integer NOT NULL DEFAULT 0,
    avg_power_w     real NOT NULL DEFAULT 0,
    max_power_w     real NOT NULL DEFAULT 0,
    PRIMARY KEY (host, gpu_uuid, minute)
);
CREATE INDEX gpu_history_minute_idx ON gpu_history (minute);

-- The newest state of a worker's GPUs (samples of the last minutes, budget, slots,
-- counters) as JSON (gpu.LiveState), replaced every few seconds; it goes with the
-- worker's registry entry.
CREATE TABLE gpu_live (
    worker     text PRIMARY KEY REFERENCES workers (name) ON DELETE CASCADE,
    host       text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    state      jsonb NOT NULL
);
