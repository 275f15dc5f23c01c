package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"dubstudio/gpu/calibrate"
)

// cue is one subtitle cue's timing.
type cue struct {
	StartMs, EndMs int
	// Dash: the cue opens with a dialogue dash, so a second speaker talks in it.
	Dash bool
}

// line is one line of the benchmark script.
type line struct {
	ID        int64
	Seconds   float64
	Character int
	Text      string
}

// readCues reads the timings file: start_ms, end_ms and dialogue_dash (0 or 1),
// tab-separated, one cue a row, # comments.
func readCues(path string) ([]cue, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cue
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		row := strings.TrimSpace(sc.Text())
		if row == "" || strings.HasPrefix(row, "#") {
			continue
		}
		fs := strings.Split(row, "\t")
		if len(fs) != 3 {
			return nil, fmt.Errorf("%s:%d: want 3 tab-separated fields, got %d", path, n, len(fs))
		}
		var v [3]int
		for i, s := range fs {
			if v[i], err = strconv.Atoi(s); err != nil {
				return nil, fmt.Errorf("%s:%d: field %d: %w", path, n, i+1, err)
			}
		}
		if v[1] <= v[0] || (len(out) > 0 && v[0] < out[len(out)-1].StartMs) {
			return nil, fmt.Errorf("%s:%d: cue out of order or empty", path, n)
		}
		out = append(out, cue{StartMs: v[0], EndMs: v[1], Dash: v[2] == 1})
	}
	return out, sc.Err()
}

// turns merges cues into dubbing lines the way a script editor does: consecutive
// cues of one speaker (no dialogue dash) with at most maxGapMs of silence between
// them become one line, up to maxMs long.
func turns(cues []cue, maxGapMs, maxMs int) []cue {
	var out []cue
	for _, c := range cues {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if !c.Dash && !last.Dash && c.StartMs-last.EndMs <= maxGapMs && c.EndMs-last.StartMs <= maxMs {
				last.EndMs = c.EndMs
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// script is count lines from the turn with index from on, given in turn to that many
// characters, each with a text as long as its slot.
func script(ts []cue, from, count, characters int) ([]line, error) {
	if from < 0 || count < 1 || from+count > len(ts) {
		return nil, fmt.Errorf("lines %d..%d asked of a script of %d", from+1, from+count, len(ts))
	}
	out := make([]line, count)
	for i := range count {
		c := ts[from+i]
		secs := float64(c.EndMs-c.StartMs) / 1000
		out[i] = line{ID: int64(i + 1), Seconds: secs, Character: i % characters, Text: calibrate.TextOf(secs)}
	}
	return out, nil
}

// audioSeconds sums the lines' slots.
func audioSeconds(ls []line) float64 {
	s := 0.0
	for _, l := range ls {
		s += l.Seconds
	}
	return s
}
