-- A source video's frame rate (issue 18: the timeline's keyboard nudge moves a clip
-- by one frame of the picture), as ffprobe gives it: a rational, 30000/1001 for NTSC.
-- Videos uploaded before this migration have none and nudge by 40 ms (25 fps).
ALTER TABLE project_videos
    ADD COLUMN frame_rate_num integer CHECK (frame_rate_num > 0),
    ADD COLUMN frame_rate_den integer CHECK (frame_rate_den > 0),
    ADD CHECK ((frame_rate_num IS NULL) = (frame_rate_den IS NULL));
