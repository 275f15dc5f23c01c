-- "Slot" now means one thing only: a line's time window (start_ms..end_ms). What a
-- profile calls the syntheses that run at once on a GPU, and what a worker registers
-- as the syntheses it runs at once, is its concurrency (gpu.Profile.Concurrency,
-- studio.WorkerInfo.Concurrency).
ALTER TABLE gpu_profiles RENAME COLUMN max_slots TO concurrency;
ALTER TABLE gpu_profiles RENAME CONSTRAINT gpu_profiles_max_slots_check TO gpu_profiles_concurrency_check;
ALTER TABLE workers RENAME COLUMN slots TO concurrency;

-- The stored JSON is migrated here, so that its one decoder (fleet.DecodeCalibration,
-- studio.GPUCalibration.ProfileValue) reads one form only:
--   gpu_calibrations.profile (studio.GPUProfile): MaxSlots -> Concurrency;
--   gpu_calibrations.result (gpu.CalibrationResult): profile.MaxSlots and
--   recommended_profile.MaxSlots -> Concurrency, slots_that_fit ->
--   concurrency_that_fits, verdict.Steps[].Slots -> Concurrency, failures[].slots ->
--   concurrency.
CREATE FUNCTION pg_temp.rename_key(j jsonb, old text, new text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(j) = 'object' AND j ? old
        THEN (j - old) || jsonb_build_object(new, j -> old) ELSE j END
$$;

-- rename_in_array renames the key in every object of the array at path.
CREATE FUNCTION pg_temp.rename_in_array(j jsonb, path text[], old text, new text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(j #> path) = 'array'
        THEN jsonb_set(j, path, (SELECT coalesce(jsonb_agg(pg_temp.rename_key(e, old, new) ORDER BY i), '[]'::jsonb)
                                 FROM jsonb_array_elements(j #> path) WITH ORDINALITY AS a(e, i)))
        ELSE j END
$$;

-- rename_at renames the key in the object at path.
CREATE FUNCTION pg_temp.rename_at(j jsonb, path text[], old text, new text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(j #> path) = 'object'
        THEN jsonb_set(j, path, pg_temp.rename_key(j #> path, old, new)) ELSE j END
$$;

UPDATE gpu_calibrations SET profile = pg_temp.rename_key(profile, 'MaxSlots', 'Concurrency')
    WHERE profile ? 'MaxSlots';

UPDATE gpu_calibrations SET result =
    pg_temp.rename_in_array(
        pg_temp.rename_in_array(
            pg_temp.rename_at(
                pg_temp.rename_at(
                    pg_temp.rename_key(result, 'slots_that_fit', 'concurrency_that_fits'),
                    '{profile}', 'MaxSlots', 'Concurrency'),
                '{recommended_profile}', 'MaxSlots', 'Concurrency'),
            '{verdict,Steps}', 'Slots', 'Concurrency'),
        '{failures}', 'slots', 'concurrency')
    WHERE jsonb_typeof(result) = 'object';

DROP FUNCTION pg_temp.rename_at(jsonb, text[], text, text);
DROP FUNCTION pg_temp.rename_in_array(jsonb, text[], text, text);
DROP FUNCTION pg_temp.rename_key(jsonb, text, text);

-- The live state (gpu.LiveState: profiles, seats) is ephemeral: each worker replaces
-- it every two seconds, so the old form is dropped instead of migrated.
DELETE FROM gpu_live;
