-- A profile can have the hosts of a GPU share one copy of the model's weights (the
-- first host lends them, the others map them): gpu.Profile.ShareWeights.
ALTER TABLE gpu_profiles ADD COLUMN share_weights boolean NOT NULL DEFAULT false;
