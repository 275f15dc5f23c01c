package tts

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"dubstudio/internal/perm"
)

// WAVInfo describes a RIFF/WAVE file.
type WAVInfo struct {
	SampleRate    int
	Channels      int
	BitsPerSample int
	// Frames is the number of samples per channel.
	Frames  int64
	Seconds float64
}

// ReadWAVInfo reads a WAV file's headers (any sample format, extra chunks allowed).
// A data chunk whose size is 0 or 0xFFFFFFFF (a streaming writer that never went back
// to fill it in, as espeak-ng does when writing to stdout) extends to the end of the file.
func ReadWAVInfo(path string) (WAVInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return WAVInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return WAVInfo{}, err
	}
	info, err := parseWAVHeader(bufio.NewReader(f), st.Size())
	if err != nil {
		return info, fmt.Errorf("reading WAV %s: %w", path, err)
	}
	return info, nil
}

var errNotWAV = errors.New("not a RIFF/WAVE file")

func parseWAVHeader(r io.Reader, size int64) (WAVInfo, error) {
	var info WAVInfo
	var head [12]byte
	if _, err := io.ReadFull(r, head[:]); err != nil || string(head[:4]) != "RIFF" || string(head[8:]) != "WAVE" {
		return info, errNotWAV
	}
	pos := int64(12)
	blockAlign := 0
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return info, errors.New("no data chunk")
		}
		pos += 8
		id, n := string(ch[:4]), int64(binary.LittleEndian.Uint32(ch[4:]))
		switch id {
		case "fmt ":
			if n < 16 || n > 1<<16 {
				return info, fmt.Errorf("fmt chunk of %d bytes", n)
			}
			buf := make([]byte, n+n%2)
			if _, err := io.ReadFull(r, buf); err != nil {
				return info, fmt.Errorf("short fmt chunk: %w", err)
			}
			pos += int64(len(buf))
			info.Channels = int(binary.LittleEndian.Uint16(buf[2:]))
			info.SampleRate = int(binary.LittleEndian.Uint32(buf[4:]))
			blockAlign = int(binary.LittleEndian.Uint16(buf[12:]))
			info.BitsPerSample = int(binary.LittleEndian.Uint16(buf[14:]))
		case "data":
			if info.SampleRate <= 0 || blockAlign <= 0 {
				return info, errors.New("data chunk before a valid fmt chunk")
			}
			if rest := size - pos; n == 0 || n == 0xFFFFFFFF || n > rest {
				n = max(rest, 0)
			}
			info.Frames = n / int64(blockAlign)
			info.Seconds = float64(info.Frames) / float64(info.SampleRate)
			return info, nil
		default:
			skip := n + n%2
			if _, err := io.CopyN(io.Discard, r, skip); err != nil {
				return info, fmt.Errorf("chunk %q: %w", id, err)
			}
			pos += skip
		}
	}
}

// WriteWAV writes mono 16-bit PCM samples to path, through a temporary file renamed into
// place, so a reader never sees half a take.
func WriteWAV(path string, sampleRate int, samples []int16) error {
	if err := os.MkdirAll(filepath.Dir(path), perm.Dir); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".take-*.wav")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	dataLen := uint32(len(samples) * 2)
	hdr := make([]byte, 44)
	copy(hdr[0:], "RIFF")
	binary.LittleEndian.PutUint32(hdr[4:], 36+dataLen)
	copy(hdr[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(hdr[16:], 16)
	binary.LittleEndian.PutUint16(hdr[20:], 1) // PCM
	binary.LittleEndian.PutUint16(hdr[22:], 1) // mono
	binary.LittleEndian.PutUint32(hdr[24:], uint32(sampleRate))
	binary.LittleEndian.PutUint32(hdr[28:], uint32(sampleRate*2))
	binary.LittleEndian.PutUint16(hdr[32:], 2)
	binary.LittleEndian.PutUint16(hdr[34:], 16)
	copy(hdr[36:], "data")
	binary.LittleEndian.PutUint32(hdr[40:], dataLen)
	if _, err := w.Write(hdr); err != nil {
		tmp.Close()
		return err
	}
	var b [2]byte
	for _, s := range samples {
		binary.LittleEndian.PutUint16(b[:], uint16(s))
		if _, err := w.Write(b[:]); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
