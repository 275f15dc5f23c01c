"""The shared stand-in model behind infer_v2 and infer_v2_5.

It follows IndexTTS2's observable behaviour: the constructor needs the model directory,
infer() recomputes the speaker conditioning only when cache_spk_audio_prompt changes (and
the emotion conditioning when cache_emo_audio_prompt changes), prints the same timing
lines, calls gpt.inference_speech once per segment and writes a 22,050 Hz 16-bit WAV.
"""

import math
import os
import random
import struct
import sys
import time
import wave

import torch

SAMPLE_RATE = 22050
RESIDENT_BYTES = 4_300_000_000
PEAK_BASE = 45_000_000
PEAK_PER_SECOND = 38_000_000


def _log(event):
    path = os.environ.get("INDEXTTS_STANDIN_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(event + "\n")


class _GPT:
    def __init__(self, tokens_per_second):
        self.tokens_per_second = tokens_per_second

    def inference_speech(self, seconds, max_generate_length):
        n = min(max_generate_length, max(1, round(seconds * self.tokens_per_second)))
        return torch.Tensor([0] * n, shape=(1, n)), None


def natural_seconds(text):
    """About 4 characters a second, at least half a second."""
    n = sum(1 for c in text if not c.isspace())
    return max(0.5, n / 12 if text.isascii() else n / 4.2)


class StandIn:
    tokens_per_second = 50

    def __init__(self, cfg_path, model_dir, use_cuda_kernel, use_deepspeed, use_qwen_emo, device):
        if not os.path.isdir(model_dir):
            raise FileNotFoundError(f"model directory {model_dir} does not exist")
        delay = float(os.environ.get("INDEXTTS_STANDIN_LOAD_SECONDS") or 0)
        if delay:
            time.sleep(delay)
        self.device = device or "cuda:0"
        self.cfg_path = cfg_path
        self.model_dir = model_dir
        self.qwen_emo = object() if use_qwen_emo else None
        self.gpt = _GPT(self.tokens_per_second)
        torch.cuda._alloc(RESIDENT_BYTES)
        self.cache_spk_cond = None
        self.cache_s2mel_style = None
        self.cache_s2mel_prompt = None
        self.cache_spk_audio_prompt = None
        self.cache_emo_cond = None
        self.cache_emo_audio_prompt = None
        self.cache_mel = None
        _log("load")

    def _conditioning(self, spk_audio_prompt, emo_audio_prompt):
        if self.cache_spk_cond is None or self.cache_spk_audio_prompt != spk_audio_prompt:
            with open(spk_audio_prompt, "rb") as f:
                data = f.read()
            seed = sum(data[:4096]) % 997
            self.cache_spk_cond = torch.Tensor([seed, len(data)], shape=(1, 1024, 2))
            self.cache_s2mel_style = torch.Tensor([seed], shape=(1, 192))
            self.cache_s2mel_prompt = torch.Tensor([seed + 1], shape=(1, 100, 512))
            self.cache_mel = torch.Tensor([seed + 2], shape=(1, 80, 100))
            self.cache_spk_audio_prompt = spk_audio_prompt
            _log("spk " + spk_audio_prompt)
        if self.cache_emo_cond is None or self.cache_emo_audio_prompt != emo_audio_prompt:
            if not os.path.isfile(emo_audio_prompt):
                raise FileNotFoundError(emo_audio_prompt)
            self.cache_emo_cond = torch.Tensor([7], shape=(1, 1024, 2))
            self.cache_emo_audio_prompt = emo_audio_prompt
            _log("emo " + emo_audio_prompt)

    def _infer(self, spk_audio_prompt, text, output_path, emo_audio_prompt, emo_alpha, emo_vector,
               use_emo_text, emo_text, max_mel_tokens, duration_factor):
        if use_emo_text and self.qwen_emo is None:
            raise RuntimeError("use_emo_text=True requires QwenEmotion")
        if use_emo_text or emo_vector is not None:
            emo_audio_prompt = None
        if emo_audio_prompt is None:
            emo_audio_prompt = spk_audio_prompt
        start = time.perf_counter()
        self._conditioning(spk_audio_prompt, emo_audio_prompt)
        if "[crash]" in text:
            os._exit(3)
        if "[boom]" in text:
            raise ValueError("stand-in failure")
        seconds = natural_seconds(text) * duration_factor
        codes, _ = self.gpt.inference_speech(seconds, max_mel_tokens)
        seconds = codes.shape[-1] / self.tokens_per_second
        peak = PEAK_BASE + int(PEAK_PER_SECOND * seconds)
        torch.cuda._alloc(peak)
        try:
            if "[oom]" in text:
                raise torch.cuda.OutOfMemoryError(
                    "CUDA out of memory. Tried to allocate 2.00 GiB (stand-in)")
            freq = 180 + 40 * random.random()
            n = int(seconds * SAMPLE_RATE)
            frames = b"".join(
                struct.pack("<h", int(8000 * math.sin(2 * math.pi * freq * i / SAMPLE_RATE))) for i in range(n))
        finally:
            torch.cuda._free(peak)
        if os.path.dirname(output_path):
            os.makedirs(os.path.dirname(output_path), exist_ok=True)
        with wave.open(output_path, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes(frames)
        total = time.perf_counter() - start
        print(f">> gpt_gen_time: {total * 0.7:.2f} seconds")
        print(f">> s2mel_time: {total * 0.2:.2f} seconds")
        print(f">> bigvgan_time: {total * 0.1:.2f} seconds")
        print(f">> Total inference time: {total:.2f} seconds")
        print(f">> Generated audio length: {seconds:.2f} seconds")
        sys.stdout.flush()
        return output_path
