package audio

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
)

// Clip is one take placed in an assembly.
type Clip struct {
	// Path is a 16-bit PCM WAV at the assembly's sample rate: mono (as Fit writes),
	// or with as many channels as the assembly.
	Path string
	// Offset is the sample frame of the output where the clip's first frame goes
	// (SamplesFor(line.StartMs, rate)). Parts before 0 or past the end are cut.
	Offset int64
}

// AssembleParams describes one output file: the full mix, or one character's stem.
type AssembleParams struct {
	OutputPath string
	// SampleRate of the output and of every clip (default 48000).
	SampleRate int
	// Channels of the output: 1 or 2 (default 1). Mono clips go to every channel.
	Channels int
	// Samples is the output's length in sample frames.
	Samples int64
	Clips   []Clip
	// BitDepth of the output: 16 (default) or 24. A 24-bit output holds the 16-bit
	// sum scaled up by 256, so it has the same levels and headroom.
	BitDepth int
	// TimeReference, when not nil, writes a Broadcast WAV bext chunk placing the
	// output's first frame this many sample frames after midnight (WAVFormat).
	TimeReference *int64
}

// assembleBlock is how many frames are mixed at a time; it bounds memory on long
// programmes (only the clips overlapping the block are held).
const assembleBlock = 1 << 16

// SamplesFor returns how many samples ms milliseconds are at rate, rounded down: the
// sample count of a slot, or the offset of a line's start.
func SamplesFor(ms, rate int) int64 { return int64(ms) * int64(rate) / 1000 }

// AssembleResult is what an assembly found while mixing.
type AssembleResult struct {
	// ClippedSamples is how many samples of the output (one per channel of a
	// frame) the sum of overlapping clips took past 16 bits, so that they were
	// clipped to full scale: 0 when nothing clipped.
	ClippedSamples int64
}

// Assemble writes a 16-bit (or 24-bit) PCM WAV of exactly p.Samples frames with each clip added
// at its sample offset; where clips overlap their samples are summed and clipped to
// 16 bits, and the result counts those. It is done here rather than with ffmpeg
// filters so that placement is exact to the sample and the same input always gives
// the same bytes. As long as nothing
// clips, the stems of a programme (one Assemble per character) add up to its mix.
//
// Clips are read as the mix reaches them and dropped once past, so memory does not
// grow with the programme's length. The file appears at p.OutputPath only when
// complete; a full disk gives an error that unwraps to ErrNoSpace.
func Assemble(ctx context.Context, p AssembleParams) (AssembleResult, error) {
	var res AssembleResult
	if p.SampleRate == 0 {
		p.SampleRate = DefaultSampleRate
	}
	if p.Channels == 0 {
		p.Channels = 1
	}
	if p.Channels != 1 && p.Channels != 2 {
		return res, fmt.Errorf("%w: assemble: %d channels", ErrInvalid, p.Channels)
	}
	if p.Samples < 0 {
		return res, fmt.Errorf("%w: assemble: length of %d samples", ErrInvalid, p.Samples)
	}
	header, err := WAVHeader(WAVFormat{SampleRate: p.SampleRate, Channels: p.Channels, BitDepth: p.BitDepth, TimeReference: p.TimeReference}, p.Samples)
	if err != nil {
		return res, fmt.Errorf("assemble: %w", err)
	}
	clips := slices.Clone(p.Clips)
	slices.SortStableFunc(clips, func(a, b Clip) int { return cmp.Compare(a.Offset, b.Offset) })

	err = writeFileAtomic(p.OutputPath, func(w io.Writer) error {
		if _, err := w.Write(header); err != nil {
			return err
		}
		ch := int64(p.Channels)
		acc := make([]int32, assembleBlock*ch)
		out := make([]int16, assembleBlock*ch)
		var out24 []byte
		if p.BitDepth == 24 {
			out24 = make([]byte, 3*assembleBlock*ch)
		}
		var active []placed
		next := 0
		for start := int64(0); start < p.Samples; start += assembleBlock {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("assemble interrupted: %w", err)
			}
			end := min(start+assembleBlock, p.Samples)
			for next < len(clips) && clips[next].Offset < end {
				c, err := loadClip(clips[next], p)
				if err != nil {
					return err
				}
				if c.end() > start {
					active = append(active, c)
				}
				next++
			}
			n := (end - start) * ch
			clear(acc[:n])
			for _, c := range active {
				c.addTo(acc[:n], start, end, ch)
			}
			for _, v := range acc[:n] {
				if v > math.MaxInt16 || v < math.MinInt16 {
					res.ClippedSamples++
				}
			}
			if out24 != nil {
				for i, v := range acc[:n] {
					v = min(max(v, math.MinInt16), math.MaxInt16) << 8
					out24[3*i], out24[3*i+1], out24[3*i+2] = byte(v), byte(v>>8), byte(v>>16)
				}
				if _, err := w.Write(out24[:3*n]); err != nil {
					return err
				}
			} else {
				for i, v := range acc[:n] {
					out[i] = int16(min(max(v, math.MinInt16), math.MaxInt16))
				}
				if err := writeSamples(w, out[:n]); err != nil {
					return err
				}
			}
			active = slices.DeleteFunc(active, func(c placed) bool { return c.end() <= end })
		}
		return nil
	})
	return res, err
}

// placed is a clip's samples at its offset.
type placed struct {
	offset   int64
	channels int64
	samples  []int16
}

func (c placed) frames() int64 { return int64(len(c.samples)) / c.channels }
func (c placed) end() int64    { return c.offset + c.frames() }

// addTo adds the part of c inside output frames [start, end) to acc, which holds
// those frames with ch channels each.
func (c placed) addTo(acc []int32, start, end, ch int64) {
	from, to := max(start, c.offset), min(end, c.end())
	for f := from; f < to; f++ {
		o := (f - start) * ch
		i := (f - c.offset) * c.channels
		if c.channels == ch {
			for k := range ch {
				acc[o+k] += int32(c.samples[i+k])
			}
			continue
		}
		v := int32(c.samples[i]) // mono into every channel
		for k := range ch {
			acc[o+k] += v
		}
	}
}

// loadClip reads a clip and checks that it suits the assembly.
func loadClip(c Clip, p AssembleParams) (placed, error) {
	pcm, err := ReadWAVFile(c.Path)
	if err != nil {
		return placed{}, fmt.Errorf("assemble: %w", err)
	}
	if pcm.SampleRate != p.SampleRate || (pcm.Channels != 1 && pcm.Channels != p.Channels) {
		return placed{}, fmt.Errorf("%w: assemble: clip %s is %d Hz with %d channels, want %d Hz mono or %d channels",
			ErrInvalid, c.Path, pcm.SampleRate, pcm.Channels, p.SampleRate, p.Channels)
	}
	return placed{offset: c.Offset, channels: int64(pcm.Channels), samples: pcm.Samples}, nil
}
