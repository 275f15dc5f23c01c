-- Downloads are named from the project's name when they are served (RFC 6266
-- filename*), so the export's stored ASCII file name was written and never read.
ALTER TABLE exports DROP COLUMN file_name;
