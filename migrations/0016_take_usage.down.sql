-- Undoes 0016_take_usage.up.sql (by hand: Apply runs up migrations only).
ALTER TABLE takes
    DROP COLUMN predicted_vram_bytes,
    DROP COLUMN measured_vram_bytes,
    DROP COLUMN kv_bytes,
    DROP COLUMN activation_bytes,
    DROP COLUMN permit_wait_ms,
    DROP COLUMN host_queue_ms,
    DROP COLUMN gpt_ms,
    DROP COLUMN s2mel_ms,
    DROP COLUMN vocoder_ms,
    DROP COLUMN batch_rows_mean,
    DROP COLUMN s2mel_group,
    DROP COLUMN gpu_index;
