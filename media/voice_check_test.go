package media_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/media"
	"dubstudio/studio"
)

// warningKeys are the keys of a character's reference warnings.
func warningKeys(ws []studio.VoiceWarning) []string {
	keys := []string{}
	for _, w := range ws {
		keys = append(keys, w.Key)
	}
	return keys
}

// TestReferenceVoicesAreCheckedForABadClone uploads generated voices: clean speech
// (espeak-ng) passes without a word; the same speech driven 20 dB into clipping is
// kept with a clipping warning; speech over loud pink noise, and pink noise alone
// (60 s of it was accepted as a voice), with a noise warning; a 0.4 s tone and
// silence are refused (TestUploadsAreBoundedByLengthAndSpace). The warnings are kept
// with the character, and a new voice replaces them.
func TestReferenceVoicesAreCheckedForABadClone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	ch := chars[0]
	speech := filepath.Join(b.dir, "speech.wav")
	msg, err := exec.Command("espeak-ng", "-w", speech,
		"A reference voice should be a clean recording of one speaker, read at an even level, in a quiet room.").CombinedOutput()
	require.NoError(t, err, string(msg))

	cases := []struct {
		name string
		file string
		want []string
	}{
		{"clean", b.ffmpeg(t, "clean.wav", "-i", speech), []string{}},
		{"clipped", b.ffmpeg(t, "clipped.wav", "-i", speech, "-af", "volume=20dB", "-c:a", "pcm_s16le"), []string{"voice.clipped"}},
		{"noisy", b.ffmpeg(t, "noisy.wav", "-i", speech, "-f", "lavfi", "-i", "anoisesrc=color=pink:amplitude=0.2:sample_rate=22050:duration=10",
			"-filter_complex", "[0:a][1:a]amix=inputs=2:duration=shortest:normalize=0"), []string{"voice.noisy"}},
		{"noise alone", b.ffmpeg(t, "pink.wav", "-f", "lavfi", "-i", "anoisesrc=color=pink:amplitude=0.3:sample_rate=16000:duration=20"),
			[]string{"voice.noisy"}},
	}
	for _, tc := range cases {
		require.NoError(t, b.lib.SetCharacterReference(ctx, b.project.ID, ch.ID, b.upload(t, tc.file, tc.name+".wav")), tc.name)
		got, err := b.store.Character(ctx, b.project.ID, ch.ID)
		require.NoError(t, err)
		require.Equal(t, tc.want, warningKeys(got.RefWarnings), tc.name)
		for _, w := range got.RefWarnings {
			require.NotEmpty(t, w.Args, "%s: the warning says its figures", tc.name)
		}
	}
}

// TestCheckVoiceFindsOneClippedChannel checks a stereo reference at 44.1 kHz whose
// left channel is speech driven 20 dB into clipping and whose right is the same
// speech clean: measured as one channel, the two averaged hid the clipping; each
// channel is measured at the file's own rate, and the worse one counts. Both
// channels clean is not flagged.
func TestCheckVoiceFindsOneClippedChannel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	speech := filepath.Join(dir, "speech.wav")
	msg, err := exec.Command("espeak-ng", "-w", speech, "One channel of this reference clips, the other does not.").CombinedOutput()
	require.NoError(t, err, string(msg))
	stereo := func(name, left string) string {
		p := filepath.Join(dir, name)
		msg, err := exec.Command("ffmpeg", "-v", "error", "-nostdin", "-i", speech, "-filter_complex",
			"[0:a]aresample=44100,asplit[a][b];[a]"+left+"[l];[l][b]join=inputs=2:channel_layout=stereo",
			"-c:a", "pcm_s16le", "-y", p).CombinedOutput()
		require.NoError(t, err, string(msg))
		return p
	}
	check, err := media.CheckVoice(t.Context(), stereo("one-clipped.wav", "volume=20dB"))
	require.NoError(t, err)
	t.Logf("one channel clipped: %.2f %% clipped", 100*check.ClippedFraction)
	require.Contains(t, warningKeys(check.Warnings()), "voice.clipped")

	check, err = media.CheckVoice(t.Context(), stereo("clean.wav", "anull"))
	require.NoError(t, err)
	require.Zero(t, check.ClippedFraction)
	require.NotContains(t, warningKeys(check.Warnings()), "voice.clipped")
}
