"""Stand-in for the parts of torchaudio IndexTTS2 uses (tests only, under real PyTorch):
functional.resample and transforms.Resample (linear interpolation, not a sinc filter),
compliance.kaldi.fbank (80 log band energies of 25 ms frames every 10 ms, from a fixed
projection of the frame's magnitude spectrum, not mel filters)."""

from torchaudio import compliance, functional, transforms  # noqa: F401
