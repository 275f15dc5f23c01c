// Package audio is everything dubstudio does to audio files: probing uploads, fitting a
// synthesized take to its slot (the duration lock), assembling takes into stems and the
// full mix, and extracting or cutting source audio.
//
// Decoding, resampling and time-stretching are done by ffmpeg and ffprobe, run as
// separate processes with argument lists (never a shell). Everything that must be exact
// or reproducible — silence trimming, loudness measurement and gain, padding to an exact
// sample count, placing clips at sample offsets — is done here in Go on PCM samples.
//
// Files are written to a temporary name in the destination directory and renamed into
// place only when complete, so a failed or cancelled operation leaves nothing
// half-written behind.
package audio
