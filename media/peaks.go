package media

import (
	"fmt"
	"sync"

	"dubstudio/audio"
)

// PeaksPerSecond is the resolution of a take's peaks (TakePeaks): one value every
// 20 ms, half a frame at 25 fps, finer than the timeline draws at its closest zoom.
const PeaksPerSecond = 50

// DefaultPeaksCache is how many takes' peaks a Library keeps in memory when
// Limits.PeaksCacheEntries is zero.
const DefaultPeaksCache = 4000

// peaksCache keeps the peaks of takes by their audio's hash: a blob never changes,
// so an entry is never stale. At most max entries; a full cache is emptied and
// filled again (a timeline reads each take's peaks once per load).
type peaksCache struct {
	mu  sync.Mutex
	max int
	m   map[string][]byte
}

func (c *peaksCache) get(sha string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[sha]
	return p, ok
}

func (c *peaksCache) put(sha string, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[string][]byte, c.max)
	}
	c.m[sha] = p
}

// TakePeaks returns the waveform of a take's audio (its blob's hash) as the timeline
// draws it: PeaksPerSecond values a second, each the largest absolute sample of its
// span over all channels, scaled to 0-255 of full scale. Peaks are computed once per
// take and kept in memory (Limits.PeaksCacheEntries).
func (l *Library) TakePeaks(sha string) ([]byte, error) {
	l.peaksOnce.Do(func() {
		l.peaks.max = l.Limits.PeaksCacheEntries
		if l.peaks.max <= 0 {
			l.peaks.max = DefaultPeaksCache
		}
	})
	if p, ok := l.peaks.get(sha); ok {
		return p, nil
	}
	path, err := l.blobs.Path(sha)
	if err != nil {
		return nil, err
	}
	pcm, err := audio.ReadWAVFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading the take's audio for its waveform: %w", err)
	}
	p := Peaks(pcm, PeaksPerSecond)
	l.peaks.put(sha, p)
	return p, nil
}

// Peaks reduces pcm to perSecond values a second (the last one covering what is
// left), each the largest absolute sample of its span over all channels, scaled to
// 0-255 of 16-bit full scale.
func Peaks(pcm audio.PCM, perSecond int) []byte {
	frames := pcm.Frames()
	if frames == 0 || pcm.SampleRate <= 0 || perSecond <= 0 {
		return nil
	}
	n := (frames*perSecond + pcm.SampleRate - 1) / pcm.SampleRate
	out := make([]byte, n)
	ch := pcm.Channels
	for i := range n {
		from := i * pcm.SampleRate / perSecond * ch
		to := min((i+1)*pcm.SampleRate/perSecond*ch, len(pcm.Samples))
		most := 0
		for _, v := range pcm.Samples[from:to] {
			a := int(v)
			if a < 0 {
				a = -a
			}
			most = max(most, a)
		}
		out[i] = byte(min(255, (most*255+16384)/32768))
	}
	return out
}
