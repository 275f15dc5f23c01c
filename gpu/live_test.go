package gpu

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/i18n"
)

func TestWarningsSurviveJSON(t *testing.T) {
	t.Parallel()
	w := Warning{Key: "gpu.calibration.too_few_runs", Args: []any{"long", 2, 3}}
	b, err := json.Marshal(w)
	require.NoError(t, err)
	var back Warning
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, "Bucket long has 2 runs; at least 3 are needed to trust its peak.", back.In(i18n.EN))

	fit := Warning{Key: "gpu.profile.does_not_fit", Args: []any{5, 1.2, 30, 3.1, 24, 90, 0}}
	require.NotContains(t, fit.In(i18n.ZH), "%!")
	require.Equal(t, []byte{'d', 'f', 's'}, verbsOf("%d%% of %.1f and %s"))
}
