from torchaudio.functional import resample


class Resample:
    def __init__(self, orig_freq=16000, new_freq=16000):
        self.orig_freq, self.new_freq = orig_freq, new_freq

    def __call__(self, waveform):
        return resample(waveform, self.orig_freq, self.new_freq)
