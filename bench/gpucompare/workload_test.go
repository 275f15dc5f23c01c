package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTurnsMergeOneSpeakersCues(t *testing.T) {
	cues := []cue{{0, 2000, false}, {2100, 4000, false}, {4200, 5000, true}, {5100, 6000, false}, {9000, 30000, false}, {30050, 36000, false}}
	got := turns(cues, 300, 25000)
	require.Equal(t, []cue{{0, 4000, false}, {4200, 5000, true}, {5100, 6000, false}, {9000, 30000, false}, {30050, 36000, false}}, got)
}

func TestTheFilmScript(t *testing.T) {
	cues, err := readCues("testdata/film_cues.tsv")
	require.NoError(t, err)
	require.Len(t, cues, 1330)
	ls, err := script(turns(cues, defaultMaxGapMs, defaultMaxLineMs), defaultFrom, defaultLines, 3)
	require.NoError(t, err)
	require.Len(t, ls, 150)
	lo, hi := ls[0].Seconds, ls[0].Seconds
	for _, l := range ls {
		lo, hi = min(lo, l.Seconds), max(hi, l.Seconds)
		require.NotEmpty(t, l.Text)
	}
	require.Less(t, lo, 1.5)
	require.Greater(t, hi, 20.0)
	require.LessOrEqual(t, hi, 25.0)
	_, err = script(nil, 0, 1, 3)
	require.Error(t, err)
}
