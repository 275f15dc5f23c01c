-- What the review view says about a take (docs/architecture.md, Review): how much of
-- its speech the duration lock cut off at the slot's end, and whether its engine is
-- deterministic (espeak-ng: a new take of an unchanged line is byte-identical, so none
-- is offered). Takes made before this migration by espeak-ng are marked too.
ALTER TABLE takes
    ADD COLUMN cut_ms        integer NOT NULL DEFAULT 0 CHECK (cut_ms >= 0),
    ADD COLUMN deterministic boolean NOT NULL DEFAULT false;
UPDATE takes SET deterministic = true WHERE engine = 'espeak';
