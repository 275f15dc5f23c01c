package audio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// PCM is 16-bit linear PCM audio held in memory, channels interleaved.
type PCM struct {
	SampleRate int
	Channels   int
	// Samples holds Frames()*Channels values, frame by frame.
	Samples []int16
}

// Frames returns the number of sample frames (samples per channel).
func (p PCM) Frames() int {
	if p.Channels <= 0 {
		return 0
	}
	return len(p.Samples) / p.Channels
}

// Duration returns the length of p.
func (p PCM) Duration() time.Duration {
	if p.SampleRate <= 0 {
		return 0
	}
	return time.Duration(int64(p.Frames()) * int64(time.Second) / int64(p.SampleRate))
}

const (
	wavFormatPCM        = 1
	wavFormatExtensible = 0xFFFE
	wavHeaderSize       = 44

	// A WAV header's rate and channels outside these are no recording: the file is
	// refused as not audio, and not handed to ffmpeg either, where a few samples
	// claimed at 1 Hz would decode to 48,000 times as many at the output's rate.
	minWAVRate, maxWAVRate = 1000, 768000
	maxWAVChannels         = 64
)

// errNoRecording is a 16-bit PCM WAV header whose rate or channels are out of range.
var errNoRecording = errors.New("WAV header outside any recording's rate or channels")

// wavFormat is what a WAV header says about the data that follows.
type wavFormat struct {
	SampleRate int
	Channels   int
	// DataSize is the data chunk's declared size in bytes; -1 when the writer did not
	// know it (streamed WAV: 0 or 0xFFFFFFFF), meaning "until the end of the file".
	DataSize int64
}

// readWAVHeader reads a RIFF WAVE header up to the start of the data chunk and checks
// that the data is 16-bit integer PCM.
func readWAVHeader(r io.Reader) (wavFormat, error) {
	var riff [12]byte
	if _, err := io.ReadFull(r, riff[:]); err != nil {
		return wavFormat{}, fmt.Errorf("%w: no WAV header: %w", ErrNotAudio, err)
	}
	if string(riff[0:4]) != "RIFF" || string(riff[8:12]) != "WAVE" {
		return wavFormat{}, fmt.Errorf("%w: not a RIFF WAVE file", ErrNotAudio)
	}
	var f wavFormat
	var haveFmt bool
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return wavFormat{}, fmt.Errorf("%w: WAV file without a data chunk: %w", ErrNotAudio, err)
		}
		id, n := string(ch[0:4]), int64(binary.LittleEndian.Uint32(ch[4:]))
		switch id {
		case "fmt ":
			if n < 16 || n > 1<<10 {
				return wavFormat{}, fmt.Errorf("%w: WAV fmt chunk of %d bytes", ErrNotAudio, n)
			}
			b := make([]byte, n+n&1)
			if _, err := io.ReadFull(r, b); err != nil {
				return wavFormat{}, fmt.Errorf("%w: short WAV fmt chunk: %w", ErrNotAudio, err)
			}
			tag := binary.LittleEndian.Uint16(b[0:])
			f.Channels = int(binary.LittleEndian.Uint16(b[2:]))
			f.SampleRate = int(binary.LittleEndian.Uint32(b[4:]))
			bits := binary.LittleEndian.Uint16(b[14:])
			if tag == wavFormatExtensible && n >= 40 {
				tag = binary.LittleEndian.Uint16(b[24:]) // the sub-format GUID starts with the tag
			}
			if tag != wavFormatPCM || bits != 16 {
				return wavFormat{}, fmt.Errorf("%w: WAV is not 16-bit PCM (format %#x, %d bits)", ErrInvalid, tag, bits)
			}
			if f.Channels < 1 || f.Channels > maxWAVChannels || f.SampleRate < minWAVRate || f.SampleRate > maxWAVRate {
				return wavFormat{}, fmt.Errorf("%w: %w: %d channels at %d Hz", ErrNotAudio, errNoRecording, f.Channels, f.SampleRate)
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return wavFormat{}, fmt.Errorf("%w: WAV data before its format", ErrNotAudio)
			}
			f.DataSize = n
			if n == 0 || n == math.MaxUint32 {
				f.DataSize = -1
			}
			return f, nil
		default:
			if _, err := io.CopyN(io.Discard, r, n+n&1); err != nil {
				return wavFormat{}, fmt.Errorf("%w: short WAV %q chunk: %w", ErrNotAudio, id, err)
			}
		}
	}
}

// ReadWAV reads a 16-bit PCM WAV file. Another sample format gives an error that
// unwraps to ErrInvalid; a file that is not WAV, or shorter than its header says,
// one that unwraps to ErrNotAudio.
func ReadWAV(r io.Reader) (PCM, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	f, err := readWAVHeader(br)
	if err != nil {
		return PCM{}, err
	}
	var data []byte
	if f.DataSize < 0 {
		data, err = io.ReadAll(br)
		if err != nil {
			return PCM{}, fmt.Errorf("error reading WAV data: %w", err)
		}
	} else {
		data = make([]byte, f.DataSize)
		if n, err := io.ReadFull(br, data); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return PCM{}, fmt.Errorf("%w: WAV data is %d bytes, header says %d", ErrNotAudio, n, f.DataSize)
			}
			return PCM{}, fmt.Errorf("error reading WAV data: %w", err)
		}
	}
	return pcmFrom(f, data), nil
}

// pcmFrom decodes the samples of a data chunk; a partial last frame is dropped.
func pcmFrom(f wavFormat, data []byte) PCM {
	data = wholeFrames(data, f.Channels)
	p := PCM{SampleRate: f.SampleRate, Channels: f.Channels, Samples: make([]int16, len(data)/2)}
	for i := range p.Samples {
		p.Samples[i] = int16(binary.LittleEndian.Uint16(data[2*i:]))
	}
	return p
}

func wholeFrames(data []byte, channels int) []byte {
	frame := 2 * channels
	return data[:len(data)/frame*frame]
}

// ParseWAV is ReadWAV for a file already in memory (a caller that also hashes it
// reads it once).
func ParseWAV(b []byte) (PCM, error) {
	f, data, err := wavData(b)
	if err != nil {
		return PCM{}, err
	}
	return pcmFrom(f, data), nil
}

// DescribeWAV describes the 16-bit PCM WAV file b, checked whole (header, and data as
// long as the header says) without decoding its samples. A file without samples is
// described with a zero duration.
func DescribeWAV(b []byte) (Info, error) {
	f, data, err := wavData(b)
	if err != nil {
		return Info{}, err
	}
	frames := int64(len(wholeFrames(data, f.Channels)) / (2 * f.Channels))
	return Info{Format: FormatWAV, Codec: "pcm_s16le", SampleRate: f.SampleRate, Channels: f.Channels,
		Duration: time.Duration(frames * int64(time.Second) / int64(f.SampleRate))}, nil
}

// wavData checks the header of the WAV file b and returns its format and data chunk.
func wavData(b []byte) (wavFormat, []byte, error) {
	r := bytes.NewReader(b)
	f, err := readWAVHeader(r)
	if err != nil {
		return f, nil, err
	}
	data := b[len(b)-r.Len():]
	if f.DataSize >= 0 {
		if int64(len(data)) < f.DataSize {
			return f, nil, fmt.Errorf("%w: WAV data is %d bytes, header says %d", ErrNotAudio, len(data), f.DataSize)
		}
		data = data[:f.DataSize]
	}
	return f, data, nil
}

// ReadWAVFile reads a 16-bit PCM WAV file from path.
func ReadWAVFile(path string) (PCM, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		var p PCM
		if p, err = ParseWAV(b); err == nil {
			return p, nil
		}
	}
	return PCM{}, fmt.Errorf("error reading %s: %w", path, err)
}

// wavHeader returns the canonical 44-byte header for frames of 16-bit PCM.
func wavHeader(rate, channels int, frames int64) ([]byte, error) {
	return WAVHeader(WAVFormat{SampleRate: rate, Channels: channels}, frames)
}

// WAVFormat is how WAVHeader lays out a PCM WAV file.
type WAVFormat struct {
	SampleRate int
	Channels   int
	// BitDepth is 16 (default) or 24.
	BitDepth int
	// TimeReference, when not nil, adds a Broadcast WAV (EBU Tech 3285) bext chunk
	// whose TimeReference is this many sample frames since midnight: where the file's
	// first sample sits on a timeline.
	TimeReference *int64
}

// bextSize is the size of a version 1 bext chunk without coding history.
const bextSize = 602

// bextTimeRefAt is where TimeReference (low 32 bits, then high) sits in a bext chunk:
// after Description (256), Originator (32), OriginatorReference (32),
// OriginationDate (10) and OriginationTime (8).
const bextTimeRefAt = 338

// WAVHeader returns the header for frames of integer PCM in format f: RIFF, fmt, an
// optional bext chunk, and the data chunk's header. It is the same bytes for the same
// format and length (the bext chunk carries no date), so exports stay reproducible.
func WAVHeader(f WAVFormat, frames int64) ([]byte, error) {
	if f.BitDepth == 0 {
		f.BitDepth = 16
	}
	if f.SampleRate < 1 || f.Channels < 1 || f.Channels > 8 || (f.BitDepth != 16 && f.BitDepth != 24) {
		return nil, fmt.Errorf("%w: WAV of %d channels at %d Hz, %d bits", ErrInvalid, f.Channels, f.SampleRate, f.BitDepth)
	}
	if f.TimeReference != nil && *f.TimeReference < 0 {
		return nil, fmt.Errorf("%w: WAV time reference %d", ErrInvalid, *f.TimeReference)
	}
	bytesPer := f.BitDepth / 8
	size := wavHeaderSize
	if f.TimeReference != nil {
		size += 8 + bextSize
	}
	data := frames * int64(f.Channels) * int64(bytesPer)
	if frames < 0 || data > math.MaxUint32-int64(size-8) {
		return nil, fmt.Errorf("%w: %d frames do not fit in a WAV file", ErrInvalid, frames)
	}
	h := make([]byte, size)
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], uint32(data+int64(size)-8))
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], wavFormatPCM)
	binary.LittleEndian.PutUint16(h[22:], uint16(f.Channels))
	binary.LittleEndian.PutUint32(h[24:], uint32(f.SampleRate))
	binary.LittleEndian.PutUint32(h[28:], uint32(f.SampleRate*f.Channels*bytesPer))
	binary.LittleEndian.PutUint16(h[32:], uint16(f.Channels*bytesPer))
	binary.LittleEndian.PutUint16(h[34:], uint16(f.BitDepth))
	at := 36
	if f.TimeReference != nil {
		copy(h[at:], "bext")
		binary.LittleEndian.PutUint32(h[at+4:], bextSize)
		b := h[at+8 : at+8+bextSize]
		copy(b[256:], "dubstudio")
		binary.LittleEndian.PutUint64(b[bextTimeRefAt:], uint64(*f.TimeReference))
		binary.LittleEndian.PutUint16(b[bextTimeRefAt+8:], 1) // version 1
		at += 8 + bextSize
	}
	copy(h[at:], "data")
	binary.LittleEndian.PutUint32(h[at+4:], uint32(data))
	return h, nil
}

// ReadTimeReference reads the chunks of a WAV file up to its data and returns the
// TimeReference of its bext chunk; ok is false when it has none.
func ReadTimeReference(r io.Reader) (ref int64, ok bool, err error) {
	var riff [12]byte
	if _, err := io.ReadFull(r, riff[:]); err != nil || string(riff[0:4]) != "RIFF" || string(riff[8:12]) != "WAVE" {
		return 0, false, fmt.Errorf("%w: not a RIFF WAVE file", ErrNotAudio)
	}
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return 0, false, fmt.Errorf("%w: WAV file without a data chunk: %w", ErrNotAudio, err)
		}
		id, n := string(ch[0:4]), int64(binary.LittleEndian.Uint32(ch[4:]))
		switch {
		case id == "data":
			return 0, false, nil
		case id == "bext" && n >= bextTimeRefAt+8:
			b := make([]byte, bextTimeRefAt+8)
			if _, err := io.ReadFull(r, b); err != nil {
				return 0, false, fmt.Errorf("%w: short bext chunk: %w", ErrNotAudio, err)
			}
			return int64(binary.LittleEndian.Uint64(b[bextTimeRefAt:])), true, nil
		default:
			if _, err := io.CopyN(io.Discard, r, n+n&1); err != nil {
				return 0, false, fmt.Errorf("%w: short WAV %q chunk: %w", ErrNotAudio, id, err)
			}
		}
	}
}

// WriteWAV writes p as a canonical 16-bit PCM WAV file (44-byte header, nothing
// else), so the same samples always give the same bytes.
func WriteWAV(w io.Writer, p PCM) error {
	if p.Channels < 1 || len(p.Samples)%p.Channels != 0 {
		return fmt.Errorf("%w: %d samples for %d channels", ErrInvalid, len(p.Samples), p.Channels)
	}
	h, err := wavHeader(p.SampleRate, p.Channels, int64(p.Frames()))
	if err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	return writeSamples(w, p.Samples)
}

// writeSamples writes s little-endian, in chunks.
func writeSamples(w io.Writer, s []int16) error {
	buf := make([]byte, 0, 32<<10)
	for len(s) > 0 {
		n := min(len(s), cap(buf)/2)
		buf = buf[:2*n]
		for i, v := range s[:n] {
			binary.LittleEndian.PutUint16(buf[2*i:], uint16(v))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}

// WriteWAVFile writes p to path through a temporary file in the same directory,
// renamed into place only when complete. A full disk gives an error that unwraps to
// ErrNoSpace.
func WriteWAVFile(path string, p PCM) error {
	return writeFileAtomic(path, func(w io.Writer) error { return WriteWAV(w, p) })
}
