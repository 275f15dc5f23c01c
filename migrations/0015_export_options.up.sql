-- Export options (docs/exports.md): stale takes left out unless included, stereo
-- (dual-mono) and 24-bit mixes and stems, speaker names in subtitles, the start
-- timecode of the Broadcast WAV time reference, and the lines an export left out.
ALTER TABLE exports
    ADD COLUMN include_stale  boolean NOT NULL DEFAULT false,
    ADD COLUMN stereo         boolean NOT NULL DEFAULT false,
    ADD COLUMN bit_depth      integer NOT NULL DEFAULT 16 CHECK (bit_depth IN (16, 24)),
    ADD COLUMN speaker_names  boolean NOT NULL DEFAULT false,
    ADD COLUMN start_timecode text NOT NULL DEFAULT '00:00:00:00',
    ADD COLUMN fps            integer NOT NULL DEFAULT 25 CHECK (fps IN (24, 25, 30)),
    ADD COLUMN left_out       jsonb NOT NULL DEFAULT '[]';

-- The revision of each line's last audible change (text, character, emotion, slot):
-- a take rendered from an earlier revision is stale. Lines edited before this
-- migration count every edit as audible, so their older takes are treated as stale.
ALTER TABLE lines ADD COLUMN audible_revision integer NOT NULL DEFAULT 0;
UPDATE lines SET audible_revision = revision;
