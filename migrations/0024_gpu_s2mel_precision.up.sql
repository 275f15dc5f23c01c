-- A profile sets the batching host's s2mel DiT precision (gpu.Profile.S2melPrecision):
-- fp32 (IndexTTS-2's own) or bf16 (the DiT in bf16, as vllm-omni runs it). An empty
-- value, as a profile built in code before this column may carry, means fp32.
ALTER TABLE gpu_profiles
    ADD COLUMN s2mel_precision text NOT NULL DEFAULT 'fp32' CHECK (s2mel_precision IN ('', 'fp32', 'bf16'));
