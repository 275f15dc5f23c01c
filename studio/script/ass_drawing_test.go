package script

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestASSDrawingsAreNotText reads the vector drawings of typeset signs as Aegisub
// writes them ({\p1} switches the text that follows to drawing commands, {\p0} back):
// an event that is only a shape is no line to voice, and the commands of one that
// also has words are not text. \pos and \pbo are other tags.
func TestASSDrawingsAreNotText(t *testing.T) {
	t.Parallel()
	in := "[Script Info]\r\nScriptType: v4.00+\r\n\r\n[Events]\r\n" +
		"Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\r\n" +
		"Dialogue: 1,0:00:01.00,0:00:02.00,Sign,,0,0,0,,{\\an7\\pos(100,100)\\p1\\bord0}m 0 0 l 100 0 100 100 0 100{\\p0}\r\n" +
		"Dialogue: 0,0:00:03.00,0:00:04.00,Default,Bob,0,0,0,,{\\p1}m 0 0 l 10 0 10 10{\\p0}Open the door!\r\n" +
		"Dialogue: 0,0:00:05.00,0:00:06.00,Default,Ann,0,0,0,,{\\pos(5,5)\\pbo2}Hello{\\p2}m 0 0 b 1 1 2 2 3 3\r\n" +
		"Dialogue: 0,0:00:07.00,0:00:08.00,Sign,,0,0,0,,{\\p1}m 0 0 l 5 5{\\p}EXIT\r\n"
	cues, err := ParseASS([]byte(in))
	require.NoError(t, err)
	require.Equal(t, []Cue{
		{SourceLine: 7, Start: ms(3000), End: ms(4000), Character: "Bob", Text: "Open the door!"},
		{SourceLine: 8, Start: ms(5000), End: ms(6000), Character: "Ann", Text: "Hello"},
		{SourceLine: 9, Start: ms(7000), End: ms(8000), Text: "EXIT"},
	}, cues)

	// A file of shapes only has no lines.
	_, err = ParseASS([]byte("[Script Info]\n[Events]\nDialogue: 0,0:00:01.00,0:00:02.00,Sign,,0,0,0,,{\\p1}m 0 0 l 1 1\n"))
	require.Equal(t, []Problem{p(1, "script.no_cues")}, problems(t, err))
}
