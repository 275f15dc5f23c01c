-- A profile can run one batching host on a GPU (protocol 2: one copy of the weights,
-- a preallocated KV cache, up to max_slots lines decoding at once), with beams rows per
-- line (0 = the default 3) and a KV cache of kv_cache_gib (0 = the host's choice):
-- gpu.Profile.Batching, Beams, KVCacheGiB.
ALTER TABLE gpu_profiles
    ADD COLUMN batching boolean NOT NULL DEFAULT false,
    ADD COLUMN beams integer NOT NULL DEFAULT 3 CHECK (beams BETWEEN 0 AND 8),
    ADD COLUMN kv_cache_gib double precision NOT NULL DEFAULT 0 CHECK (kv_cache_gib >= 0);
