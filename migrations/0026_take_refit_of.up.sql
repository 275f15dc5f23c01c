-- A take fitted again from another take's synthesis (its raw audio, takes.raw_sha256)
-- after a change to the slots ran the other take's borrowed tail into the next line
-- (studio.Store.OverrunTakes, docs/picture.md, "The slot change") names that take: it
-- used no GPU, so throughput and synthesis figures leave it out. NULL for a take
-- synthesized for itself.
ALTER TABLE takes ADD COLUMN refit_of bigint REFERENCES takes (id) ON DELETE SET NULL;
