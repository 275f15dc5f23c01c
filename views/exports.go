package views

import (
	"strconv"
	"strings"

	"dubstudio/studio"
)

// exportFormat describes an export's mixes and stems: "48 kHz / 24-bit, Stereo
// (dual-mono), 01:00:00:00".
func exportFormat(p Page, e studio.Export) string {
	bits, ch := p.T("export.bits16"), p.T("export.mono")
	if e.BitDepth == 24 {
		bits = p.T("export.bits24")
	}
	if e.Stereo {
		ch = p.T("export.stereo")
	}
	out := bits + ", " + ch + ", " + p.T("export.timecode_at", e.StartTimecode, string(e.FPS))
	if e.BedMix {
		out += ", " + p.T("export.has_bed_mix")
	}
	return out
}

// leftOutIndexes lists the line numbers of an export's left-out lines: "3, 7".
func leftOutIndexes(l []studio.LeftOutLine) string {
	parts := make([]string, len(l))
	for i, x := range l {
		parts[i] = strconv.Itoa(x.Index)
	}
	return strings.Join(parts, ", ")
}
