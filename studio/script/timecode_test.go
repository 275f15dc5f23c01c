package script

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseTimecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"00:01:02,345", ms(62345), true},
		{"00:01:02.345", ms(62345), true},
		{"01:02.345", ms(62345), true},
		{"1:02.345", ms(62345), true},
		{"62.345", ms(62345), true},
		{"62,345", ms(62345), true},
		{"62", ms(62000), true},
		{"0", 0, true},
		{"00:00:01", ms(1000), true},
		{"00:00:01.5", ms(1500), true},
		{"00:00:01.05", ms(1050), true},
		{"00:00:01.0005", ms(1001), true},
		{"00:00:01.123456789", ms(1123), true},
		{"100:00:00.000", 100 * time.Hour, true},
		{"499:59:59.999", MaxTimecode, true},
		{"499:59:59.9996", 0, false},
		{"500:00:00.000", 0, false},
		{"999:00:00.000", 0, false},
		{"9999999.999", 0, false},
		{"", 0, false},
		{" 1", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1e3", 0, false},
		{"00:60:00.000", 0, false},
		{"00:00:60.000", 0, false},
		{"00:00:0", 0, false},
		{"00:0:00", 0, false},
		{"0:00:00:00", 0, false},
		{"00:00:01.1234567890", 0, false},
		{"00:01:02;345", 0, false},
		{"００:01:02.345", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, ok := parseTimecode(tt.in)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestFormatTimecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "00:00:00.000"},
		{ms(62345), "00:01:02.345"},
		{time.Hour + ms(1), "01:00:00.001"},
		{123 * time.Hour, "123:00:00.000"},
		{ms(1) + 499*time.Microsecond, "00:00:00.001"},
		{ms(1) + 500*time.Microsecond, "00:00:00.002"},
		{-ms(1500), "-00:00:01.500"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, FormatTimecode(tt.in))
		if tt.in >= 0 {
			back, ok := parseTimecode(tt.want)
			require.True(t, ok)
			require.Equal(t, tt.in.Round(time.Millisecond), back)
		}
	}
	require.Equal(t, "00:01:02,345", formatTimecode(ms(62345), ','))
}

func TestParseTimingLine(t *testing.T) {
	t.Parallel()
	start, end, ok := parseTimingLine("00:00:01,000-->00:00:02,000")
	require.True(t, ok)
	require.Equal(t, []time.Duration{ms(1000), ms(2000)}, []time.Duration{start, end})

	start, end, ok = parseTimingLine("  00:01.000   -->   00:02.000 align:start line:0%  ")
	require.True(t, ok)
	require.Equal(t, []time.Duration{ms(1000), ms(2000)}, []time.Duration{start, end})

	for _, bad := range []string{"00:01.000 -> 00:02.000", "--> 00:02.000", "00:01.000 -->", "00:01.000 --> x", "x --> 00:01.000"} {
		_, _, ok := parseTimingLine(bad)
		require.False(t, ok, bad)
	}
}
