// Package fleet is dubstudio's GPU control plane: a worker's GPUs as
// workflow.Permits (GPUs: the VRAM-budgeted executor of package gpu over one pool of
// model hosts per GPU), the profiles and calibrations applied to them live, the
// calibrations run on them (CalibrationHosts), and the Agent that connects a worker's
// GPUs to the database: it publishes their live state, stores their history, applies
// what admins set and runs the calibrations they request.
//
// It is also the one reader of what the agents store: the published live state
// (ReadBoard, DecodeState), calibration results (DecodeCalibration, RecordOf), and
// the profile checks the admin page makes before storing (ParseProfile, CheckFits,
// SaveProfile, AssignProfile). Each JSON contract has its encoder and decoder here.
//
// Dependencies: web -> fleet -> workflow (Permits), gpu, gpu/calibrate, gpu/ttshost,
// tts, studio. workflow never imports fleet: the worker sees only Permits.
package fleet
