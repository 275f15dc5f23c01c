-- A take records the time its line waited in a batching host between its last GPT
-- token and the start of its s2mel group (studio.TakeUsage.S2MelWaitMs): at load
-- much of a line's time, which no stage counted before. 0 for older takes and for
-- hosts that do not report it.
ALTER TABLE takes ADD COLUMN s2mel_wait_ms integer NOT NULL DEFAULT 0;
