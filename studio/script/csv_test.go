package script

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCSVExcelSeparatorLine reads a file that starts with Excel's "sep=;" line, which
// tools write so that Excel opens the file with that separator whatever the
// computer's list separator is: the line names the separator, the header follows.
func TestCSVExcelSeparatorLine(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in string }{
		{"semicolon", "\uFEFFsep=;\r\nStart;End;Character;Text\r\n00:00:01,000;00:00:02,500;Bob;\"Hi,\r\nthere\"\r\n"},
		{"comma", "sep=,\nStart,End,Character,Text\n00:00:01.000,00:00:02.500,Bob,\"Hi,\nthere\"\n"},
		{"tab, case", "SEP=\t\nStart\tEnd\tCharacter\tText\n00:00:01.000\t00:00:02.500\tBob\t\"Hi,\nthere\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, FormatCSV, Detect("export.txt", []byte(tt.in)))
			cues, err := Parse("export.txt", []byte(tt.in))
			require.NoError(t, err)
			require.Equal(t, []Cue{{SourceLine: 3, Start: ms(1000), End: ms(2500), Character: "Bob", Text: "Hi,\nthere"}}, cues)
		})
	}
	// A problem is on its line of the file, the separator line counted.
	_, err := ParseCSV([]byte("sep=;\nStart;End;Character;Text\n1;x;Bob;Hi\n"))
	require.Equal(t, []Problem{p(3, "script.bad_timecode", "x")}, problems(t, err))
	// Only the first line names the separator: later it is a row like any other.
	_, err = ParseCSV([]byte("Start;End;Character;Text\nsep=,\n"))
	require.Equal(t, []Problem{p(2, "script.csv_column_count", 1, 4)}, problems(t, err))
}
