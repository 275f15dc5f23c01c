-- A speaker preparation that failed for good (a reference voice the engine refuses,
-- or its attempts spent): the syntheses that were waiting for it fail with its error
-- instead of waiting for ever, and a render queued after it tries it again
-- (workflow/prepare_speaker_worker.go). No foreign key: the row keeps no blob, and
-- goes when the preparation succeeds.
CREATE TABLE speaker_conditioning_failures (
    ref_sha256    text NOT NULL,
    model_version text NOT NULL,
    error         text NOT NULL,
    failed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ref_sha256, model_version)
);
