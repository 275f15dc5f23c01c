package media_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/media"
)

func TestPeaksFollowTheLoudestSampleOfEachSpan(t *testing.T) {
	t.Parallel()
	// One second of stereo at 1 kHz: silence, then a full-scale negative sample in the
	// right channel of the 25th frame of the 2nd span, then half scale to the end.
	pcm := audio.PCM{SampleRate: 1000, Channels: 2, Samples: make([]int16, 2*1000)}
	pcm.Samples[2*(20+5)+1] = -32768
	for i := 500; i < 1000; i++ {
		pcm.Samples[2*i] = 16384
	}
	p := media.Peaks(pcm, 50)
	require.Len(t, p, 50, "50 spans of 20 ms")
	require.Equal(t, byte(0), p[0])
	require.Equal(t, byte(255), p[1], "the negative full-scale sample, in the second channel")
	require.Equal(t, byte(0), p[2])
	require.Equal(t, byte(128), p[25], "half scale")
	require.Equal(t, byte(128), p[49])

	// A length that is not a whole number of spans keeps its tail as a last span.
	short := audio.PCM{SampleRate: 1000, Channels: 1, Samples: make([]int16, 1010)}
	short.Samples[1005] = 32767
	p = media.Peaks(short, 50)
	require.Len(t, p, 51)
	require.Equal(t, byte(255), p[50])
	require.Nil(t, media.Peaks(audio.PCM{SampleRate: 1000, Channels: 1}, 50), "no audio, no peaks")
}
