-- What one take's synthesis used (studio.TakeUsage, docs/gpu.md "What a take
-- records"): the memory the executor admitted the line for and what it measured
-- against it (both beyond the host's resident memory), a batching host's KV and
-- activation share, the time spent waiting for a permit in the worker and queued in
-- the host, the GPT, s2mel and vocoder seconds, the batch it decoded in, and the
-- GPU's index. 0 (NULL for the index) where the engine or an older take has none.
ALTER TABLE takes
    ADD COLUMN predicted_vram_bytes bigint NOT NULL DEFAULT 0,
    ADD COLUMN measured_vram_bytes  bigint NOT NULL DEFAULT 0,
    ADD COLUMN kv_bytes             bigint NOT NULL DEFAULT 0,
    ADD COLUMN activation_bytes     bigint NOT NULL DEFAULT 0,
    ADD COLUMN permit_wait_ms       integer NOT NULL DEFAULT 0,
    ADD COLUMN host_queue_ms        integer NOT NULL DEFAULT 0,
    ADD COLUMN gpt_ms               integer NOT NULL DEFAULT 0,
    ADD COLUMN s2mel_ms             integer NOT NULL DEFAULT 0,
    ADD COLUMN vocoder_ms           integer NOT NULL DEFAULT 0,
    ADD COLUMN batch_rows_mean      double precision NOT NULL DEFAULT 0,
    ADD COLUMN s2mel_group          integer NOT NULL DEFAULT 0,
    ADD COLUMN gpu_index            integer;
