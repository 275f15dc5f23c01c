package script

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportEncodings reads every file of testdata/encodings, made with iconv from its
// UTF-8 twin: each must be detected as the encoding its name says and give the cues of
// its twin, byte for byte.
func TestImportEncodings(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/encodings/*.srt")
	require.NoError(t, err)
	require.Len(t, files, 17)
	// Content cannot tell ISO-8859-15 from Windows-1252 when the text uses none of
	// the eight code points where they differ, nor ISO-8859-1 from Windows-1252 when it
	// uses none of 0x80-0x9F; GBK is a subset of GB18030. Each reads the same.
	detected := map[string]string{EncodingISO885915: EncodingWindows1252, EncodingISO88591: EncodingWindows1252,
		EncodingGBK: EncodingGB18030}
	for _, file := range files {
		base := filepath.Base(file)
		parts := strings.Split(base, ".")
		lang, enc := parts[0], parts[1]
		if enc == "utf8" {
			enc = EncodingUTF8
		}
		t.Run(base, func(t *testing.T) {
			t.Parallel()
			twin, err := Parse("twin.srt", readTestdata(t, "encodings/"+lang+".utf8.srt"))
			require.NoError(t, err)
			require.Len(t, twin, 3)
			data := readTestdata(t, "encodings/"+base)

			res, err := Import(base, data, ImportOpts{})
			require.NoError(t, err)
			want := enc
			if d, ok := detected[enc]; ok {
				want = d
			}
			require.Equal(t, want, res.Encoding)
			require.Equal(t, FormatSRT, res.Format)
			require.Equal(t, twin, res.Cues)

			res, err = Import(base, data, ImportOpts{Encoding: enc})
			require.NoError(t, err, "asked for %s", enc)
			require.Equal(t, enc, res.Encoding)
			require.Equal(t, twin, res.Cues)
		})
	}
}

// TestImportWrongEncoding checks that a user's choice is obeyed: GB18030 bytes read as
// Shift-JIS or UTF-8 are refused with the line of each bad byte, and an unknown name is
// refused.
func TestImportWrongEncoding(t *testing.T) {
	t.Parallel()
	data := readTestdata(t, "encodings/zh.gb18030.srt")
	_, err := Import("zh.srt", data, ImportOpts{Encoding: EncodingUTF8})
	require.Equal(t, []Problem{p(3, "script.invalid_utf8"), p(7, "script.invalid_utf8"), p(11, "script.invalid_utf8")}, problems(t, err))

	fr := readTestdata(t, "encodings/fr.windows-1252.srt")
	res, err := Import("fr.srt", fr, ImportOpts{Encoding: EncodingEUCKR})
	require.Error(t, err)
	require.Equal(t, EncodingEUCKR, res.Encoding)
	for _, pr := range problems(t, err) {
		require.Equal(t, "script.invalid_encoding", pr.Key)
	}

	_, err = Import("fr.srt", fr, ImportOpts{Encoding: "klingon"})
	require.Equal(t, []Problem{p(1, "script.unknown_encoding", "klingon")}, problems(t, err))
}

// TestUTF32BOMNotUTF16 checks that FF FE 00 00 is read as UTF-32LE, not as UTF-16LE
// followed by a NUL.
func TestUTF32BOMNotUTF16(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/encodings/zh.utf-32le.srt")
	require.NoError(t, err)
	require.Equal(t, []byte{0xFF, 0xFE, 0, 0}, data[:4])
	res, err := Import("x", data, ImportOpts{})
	require.NoError(t, err)
	require.Equal(t, EncodingUTF32LE, res.Encoding)
	// A unit past U+10FFFF is a problem of its line.
	bad := append(append([]byte(nil), data...), 0x00, 0x00, 0x11, 0x00)
	_, err = Import("x", bad, ImportOpts{})
	require.Equal(t, []Problem{p(12, "script.invalid_utf32")}, problems(t, err))
}

// TestImportLatin1 reads testdata/latin1.srt, a Western file in ISO-8859-1 (written
// with iconv for the first importer's tests), which was refused as invalid UTF-8.
func TestImportLatin1(t *testing.T) {
	t.Parallel()
	res, err := Import("latin1.srt", readTestdata(t, "latin1.srt"), ImportOpts{})
	require.NoError(t, err)
	require.Equal(t, EncodingWindows1252, res.Encoding)
	require.Len(t, res.Cues, 3)
	require.Equal(t, "A coffee at the café?", res.Cues[0].Text)
	require.Equal(t, "Don't be naïve.", res.Cues[1].Text)
}

// TestChosenEncodingDropsTheMark: a byte-order mark is never text, also when the user
// reads the file as another encoding than the mark's (UTF-8 with a mark read as
// Windows-1252: no "ï»¿" before the WEBVTT header).
func TestChosenEncodingDropsTheMark(t *testing.T) {
	t.Parallel()
	vtt := "WEBVTT\r\n\r\n00:00:01.000 --> 00:00:02.000\r\nHello.\r\n"
	res, err := Import("bom.vtt", append([]byte("\xEF\xBB\xBF"), vtt...), ImportOpts{Encoding: EncodingWindows1252})
	require.NoError(t, err)
	require.Equal(t, FormatVTT, res.Format)
	require.Len(t, res.Cues, 1)
	require.Equal(t, "Hello.", res.Cues[0].Text)
}
