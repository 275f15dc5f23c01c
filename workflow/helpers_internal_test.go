package workflow

import (
	"context"
)

// InsertForTest inserts a job outside any transaction and reports whether River
// skipped it as a duplicate. Tests use it to check uniqueness.
func InsertForTest(ctx context.Context, p *Pipeline, args SynthesizeArgs) (bool, error) {
	res, err := p.inserter.Insert(ctx, args, nil)
	if err != nil {
		return false, err
	}
	return res.UniqueSkippedAsDuplicate, nil
}
