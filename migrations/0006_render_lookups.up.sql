-- A render's fit looks up the stretch ratio of the same character's previous line
-- (RenderInput): walking this index backwards from the line finds it in a few rows,
-- where the (project_id, character_id) index made PostgreSQL read and sort every line
-- of the character (1.4 ms of a 2,000-line project's render, per line). It serves
-- the lookups by (project_id, character_id) that the old index served.
CREATE INDEX lines_project_character_idx_idx ON lines (project_id, character_id, idx);
DROP INDEX lines_project_character_idx;
