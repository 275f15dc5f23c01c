-- An export's start timecode counts at any of the frame rates an import reads
-- (script.FrameRates), 23.976 and 29.97 drop-frame among them, named as editors name
-- them ("29.97"), where it took the whole rates 24, 25 and 30 only.
ALTER TABLE exports DROP CONSTRAINT exports_fps_check;
ALTER TABLE exports ALTER COLUMN fps DROP DEFAULT;
ALTER TABLE exports ALTER COLUMN fps TYPE text USING fps::text;
ALTER TABLE exports ALTER COLUMN fps SET DEFAULT '25';
ALTER TABLE exports ADD CONSTRAINT exports_fps_check
    CHECK (fps IN ('23.976', '24', '25', '29.97', '30', '50', '59.94', '60'));
