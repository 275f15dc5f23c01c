import torch.nn.functional as F


def resample(waveform, orig_freq, new_freq):
    n = max(1, round(waveform.shape[-1] * new_freq / orig_freq))
    return F.interpolate(waveform.reshape(1, -1, waveform.shape[-1]), size=n, mode="linear",
                         align_corners=False).reshape(*waveform.shape[:-1], n)
