import torch


def fbank(waveform, num_mel_bins=80, dither=0, sample_frequency=16000, **_kwargs):
    """[1, n] audio -> [frames, num_mel_bins]."""
    win, hop = int(0.025 * sample_frequency), int(0.010 * sample_frequency)
    x = waveform.reshape(-1)
    if x.shape[0] < win:
        x = torch.nn.functional.pad(x, (0, win - x.shape[0]))
    frames = x.unfold(0, win, hop)
    spec = torch.fft.rfft(frames * torch.hann_window(win, device=x.device)).abs()
    proj = torch.rand(spec.shape[-1], num_mel_bins, generator=torch.Generator().manual_seed(5)).to(x.device)
    return torch.log(spec @ proj + 1e-6)
