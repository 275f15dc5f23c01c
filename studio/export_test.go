package studio

import "context"

// StartFitWatched is StartFit without a hand-off (committing asynchronously), run in
// an explicit transaction that watch sees, for a test to read its commit setting.
func StartFitWatched(ctx context.Context, s *Store, lineID int64, renderSeq int, watch HandOffFunc, blobs ...Blob) (*FitInput, error) {
	return s.startFit(ctx, lineID, renderSeq, true, watch, blobs...)
}

// SetBlobGCLocked sets the hook that runs after the blob collector has locked a batch.
func SetBlobGCLocked(s *Store, f func(sums []string)) { s.blobGCLocked = f }
