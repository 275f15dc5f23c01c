ALTER TABLE exports DROP COLUMN bed_mix;
DROP TRIGGER project_beds_project_blobs ON project_beds;
DROP FUNCTION project_blobs_from_bed();
DROP TABLE project_beds;
