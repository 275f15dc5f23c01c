-- A render writes its line's state three or four times (synthesizing, fitting, done),
-- and an update that changes an indexed column writes every index of the table
-- again. Without an index on state, and with room left in each page, these updates
-- are heap-only (HOT): no index is touched. The lookups by project and state
-- (render pending, retry failed, the dashboard's counts) read the project's lines
-- through lines_project_idx_key instead, a few thousand rows at most.
DROP INDEX lines_project_state_idx;
ALTER TABLE lines SET (fillfactor = 80);

-- The fit asks how much silence follows its line before another line starts: the
-- first line starting at or after it, found in this index in a row or two (the
-- earlier lookup read every later line of the project).
CREATE INDEX lines_project_start_idx ON lines (project_id, start_ms);

-- A take belongs to its line's project. Checked through the line, which the render
-- has locked already, a take no longer locks its project's row: every fit of a
-- project took that shared lock at once, and PostgreSQL writes such locks down as
-- multixacts.
ALTER TABLE lines ADD CONSTRAINT lines_id_project_key UNIQUE (id, project_id);
ALTER TABLE takes
    DROP CONSTRAINT takes_line_id_fkey,
    DROP CONSTRAINT takes_project_id_fkey,
    ADD CONSTRAINT takes_line_project_fkey FOREIGN KEY (line_id, project_id)
        REFERENCES lines (id, project_id) ON DELETE CASCADE;
