"""The shared stand-in model behind infer_v2 and infer_v2_5.

It does with each argument what IndexTTS2 does (indextts/infer_v2.py, infer_v2_5.py), so
that a host passing one wrongly fails a test:
- the emotion: a vector or emotion text replaces the emotion audio; emo_alpha scales a
  vector (clamped to 0..1, cut to 4 decimals); without emotion audio the speaker's audio
  is the emotion reference and emo_alpha becomes 1; emotion text needs the Qwen model;
- the conditioning cache slot: recomputed only when cache_spk_audio_prompt (or
  cache_emo_audio_prompt) changes, emptying the CUDA cache when an old one is dropped;
- the text: split into segments of at most max_text_tokens_per_segment tokens at sentence
  ends (a longer sentence stays whole: the stand-in's worst case), gpt.inference_speech
  called once per segment with the segment's tokens and max_generate_length, returning
  its codes followed by the stop token, or max_generate_length codes and no stop token
  when the speech does not fit; segments joined with interval_silence ms of silence;
- the GPT's position tables (config.yaml's gpt.max_text_tokens and max_mel_tokens): past
  them a CUDA device-side assert, after which every call fails, as on a real GPU;
- randomness only from torch's generator (torch.manual_seed), never Python's random;
- duration_factor (2.5) scales the audio, not the codes; BigVGAN's kernel is imported the
  way the constructor does, falling back to torch when it fails.

Every infer() appends `infer <json>` to INDEXTTS_STANDIN_LOG with what it used.
"""

import json
import math
import os
import re
import struct
import sys
import time
import wave

import torch

SAMPLE_RATE = 22050
RESIDENT_BYTES = 4_300_000_000
PEAK_BASE = 45_000_000
PEAK_PER_SECOND = 38_000_000
STOP_MEL_TOKEN = 8193
EMOTIONS = ("happy", "angry", "sad", "afraid", "disgusted", "melancholic", "surprised", "calm")


def _log(event):
    path = os.environ.get("INDEXTTS_STANDIN_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(event + "\n")


def _config_int(text, key, default):
    m = re.search(r"^\s+" + key + r":\s*(\d+)", text, re.M)
    return int(m.group(1)) if m else default


# The torch shim (../torch) has no nn: under it the stand-in is the one-request model
# of infer(); under real PyTorch it also builds stand-ins of IndexTTS2's own modules
# (_modules.py) for the batching adapter, whose infer() it does not run.
REAL_TORCH = hasattr(torch, "nn")


class DeviceAssert(RuntimeError):
    pass


class _GPT:
    def __init__(self, owner):
        self.owner = owner

    def inference_speech(self, speech_condition, text_inputs, *args, max_generate_length=1500, **kwargs):
        o = self.owner
        n = text_inputs.shape[-1]
        if n > o.max_text_tokens or max_generate_length > o.max_mel_tokens:
            o.broken = True
            raise DeviceAssert("CUDA error: device-side assert triggered (stand-in: position table overrun)")
        seconds = natural_seconds(text_inputs.data)
        n_codes = max(1, round(seconds * o.tokens_per_second))
        if n_codes >= max_generate_length:
            codes = [7] * max_generate_length
        else:
            codes = [7] * n_codes + [STOP_MEL_TOKEN]
        return torch.Tensor(codes, shape=(1, len(codes))), None


class _Qwen:
    """Emotion from text: the emotion names found in the text, else calm."""

    def inference(self, text):
        found = {e: (1.0 if e in text.lower() else 0.0) for e in EMOTIONS}
        if not any(found.values()):
            found["calm"] = 1.0
        return found


def natural_seconds(tokens):
    """About 12 characters a second of Latin text, 4.2 of Chinese; at least 0.5 s."""
    text = "".join(tokens)
    n = sum(1 for c in text if not c.isspace())
    return max(0.5, n / 12 if text.isascii() else n / 4.2)


def tokenize(text):
    """One token per CJK character or punctuation mark, one per Latin word."""
    return re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]|[A-Za-z0-9']+|[^\sA-Za-z0-9']", text)


def split_segments(tokens, max_tokens):
    sentences, cur = [], []
    for t in tokens:
        cur.append(t)
        if t in (".", "!", "?", "。", "！", "？"):
            sentences.append(cur)
            cur = []
    if cur:
        sentences.append(cur)
    segments, seg = [], []
    for s in sentences:
        if seg and len(seg) + len(s) > max_tokens:
            segments.append(seg)
            seg = []
        seg = seg + s
    if seg:
        segments.append(seg)
    return segments


class StandIn:
    tokens_per_second = 50
    variant = "2"

    def __init__(self, cfg_path, model_dir, use_cuda_kernel, use_deepspeed, use_qwen_emo, device):
        if not os.path.isdir(model_dir):
            raise FileNotFoundError(f"model directory {model_dir} does not exist")
        delay = float(os.environ.get("INDEXTTS_STANDIN_LOAD_SECONDS") or 0)
        if delay:
            time.sleep(delay)
        with open(cfg_path, encoding="utf-8") as f:
            cfg = f.read()
        self.max_mel_tokens = _config_int(cfg, "max_mel_tokens", 1815)
        self.max_text_tokens = _config_int(cfg, "max_text_tokens", 600)
        self.stop_mel_token = _config_int(cfg, "stop_mel_token", STOP_MEL_TOKEN)
        self.device = device or "cuda:0"
        self.use_cuda_kernel = use_cuda_kernel is None or use_cuda_kernel
        if device is not None:
            self.use_cuda_kernel = bool(use_cuda_kernel) and device.startswith("cuda")
        if self.use_cuda_kernel:
            try:
                from indextts.s2mel.modules.bigvgan.alias_free_activation.cuda import activation1d  # noqa: F401
            except Exception as e:  # noqa: BLE001 (as the real constructor)
                print(">> Failed to load custom CUDA kernel for BigVGAN. Falling back to torch.")
                print(f"{e!r}")
                self.use_cuda_kernel = False
        self.cfg_path = cfg_path
        self.model_dir = model_dir
        self.qwen_emo = _Qwen() if use_qwen_emo else None
        self.broken = False
        if REAL_TORCH:
            # Under real PyTorch: IndexTTS2's own modules, for the batching adapter.
            from indextts import _modules

            _modules.build(self, cfg, self.variant)
        else:
            self.gpt = _GPT(self)
            torch.cuda._alloc(RESIDENT_BYTES)
        self.cache_spk_cond = None
        self.cache_s2mel_style = None
        self.cache_s2mel_prompt = None
        self.cache_spk_audio_prompt = None
        self.cache_emo_cond = None
        self.cache_emo_audio_prompt = None
        self.cache_mel = None
        _log("load")

    def _load_and_cut_audio(self, audio_path, max_audio_length_seconds, verbose=False, sr=None):
        """As IndexTTS2's: (audio [1, n] float32 in -1..1, sample rate), cut to at most
        max_audio_length_seconds; resampled (linearly) to sr when given."""
        with wave.open(audio_path, "rb") as w:
            rate, n, width = w.getframerate(), w.getnframes(), w.getsampwidth()
            raw = w.readframes(n)
            channels = w.getnchannels()
        if width != 2:
            raise ValueError(f"{audio_path}: the stand-in reads 16-bit WAV only")
        samples = torch.frombuffer(bytearray(raw), dtype=torch.int16).float().view(-1, channels).mean(1) / 32768
        samples = samples[:int(max_audio_length_seconds * rate)][None]
        if sr and sr != rate:
            import torchaudio

            samples = torchaudio.functional.resample(samples, rate, sr)
            rate = sr
        return samples, rate

    def _conditioning(self, spk_audio_prompt, emo_audio_prompt):
        if self.cache_spk_cond is None or self.cache_spk_audio_prompt != spk_audio_prompt:
            if self.cache_spk_cond is not None:
                self.cache_spk_cond = self.cache_s2mel_style = self.cache_s2mel_prompt = self.cache_mel = None
                torch.cuda.empty_cache()
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
            if self.cache_emo_cond is not None:
                self.cache_emo_cond = None
                torch.cuda.empty_cache()
            if not os.path.isfile(emo_audio_prompt):
                raise FileNotFoundError(emo_audio_prompt)
            self.cache_emo_cond = torch.Tensor([7], shape=(1, 1024, 2))
            self.cache_emo_audio_prompt = emo_audio_prompt
            _log("emo " + emo_audio_prompt)

    def _infer(self, spk_audio_prompt, text, output_path, emo_audio_prompt, emo_alpha, emo_vector,
               use_emo_text, emo_text, use_random, interval_silence, max_text_tokens_per_segment,
               max_mel_tokens, duration_factor, lang=None):
        if self.broken:
            raise DeviceAssert("CUDA error: device-side assert triggered (stand-in: an earlier assert)")
        start = time.perf_counter()
        if use_emo_text or emo_vector is not None:
            emo_audio_prompt = None
        if use_emo_text:
            if self.qwen_emo is None:
                raise RuntimeError("use_emo_text=True requires QwenEmotion")
            emo_vector = list(self.qwen_emo.inference(emo_text if emo_text is not None else text).values())
        if emo_vector is not None:
            scale = max(0.0, min(1.0, emo_alpha))
            if scale != 1.0:
                emo_vector = [int(x * scale * 10000) / 10000 for x in emo_vector]
        if emo_audio_prompt is None:
            emo_audio_prompt = spk_audio_prompt
            emo_alpha = 1.0
        self._conditioning(spk_audio_prompt, emo_audio_prompt)
        if "[crash]" in text:
            os._exit(3)
        if "[boom]" in text:
            raise ValueError("stand-in failure")
        segments = split_segments(tokenize(text), max_text_tokens_per_segment)
        draw = torch.rand()
        freq = 150 + 100 * draw
        if emo_vector is not None:
            freq += 200 * sum(i * v for i, v in enumerate(emo_vector)) / len(emo_vector)
        lengths = []
        for seg in segments:
            tokens = torch.Tensor(seg, shape=(1, len(seg)))
            if lang is None:
                codes, _ = self.gpt.inference_speech(self.cache_spk_cond, tokens, self.cache_emo_cond,
                                                     max_generate_length=max_mel_tokens)
            else:
                codes, _ = self.gpt.inference_speech(self.cache_spk_cond, tokens, lang, self.cache_emo_cond,
                                                     max_generate_length=max_mel_tokens)
            row = codes.tolist()[0]
            lengths.append(row.index(self.stop_mel_token) if self.stop_mel_token in row else len(row))
        seconds = [n / self.tokens_per_second * duration_factor for n in lengths]
        total_seconds = sum(seconds) + interval_silence / 1000 * (len(segments) - 1)
        peak = PEAK_BASE + int(PEAK_PER_SECOND * max(seconds))
        torch.cuda._alloc(peak)
        try:
            if "[oom]" in text:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (stand-in)")
            silence = b"\0\0" * int(SAMPLE_RATE * interval_silence / 1000)
            parts = []
            for s in seconds:
                n = int(s * SAMPLE_RATE)
                parts.append(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * freq * i / SAMPLE_RATE)))
                                      for i in range(n)))
            frames = silence.join(parts)
        finally:
            torch.cuda._free(peak)
        if os.path.dirname(output_path):
            os.makedirs(os.path.dirname(output_path), exist_ok=True)
        with wave.open(output_path, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes(frames)
        _log("infer " + json.dumps({
            "text": text, "lang": lang, "segments": ["".join(s) for s in segments], "codes": lengths,
            "emo_audio_prompt": emo_audio_prompt, "emo_alpha": emo_alpha, "emo_vector": emo_vector,
            "use_random": use_random, "draw": draw, "max_mel_tokens": max_mel_tokens,
            "max_text_tokens_per_segment": max_text_tokens_per_segment, "duration_factor": duration_factor,
        }, ensure_ascii=False))
        total = time.perf_counter() - start
        print(f">> gpt_gen_time: {total * 0.7:.2f} seconds")
        print(f">> s2mel_time: {total * 0.2:.2f} seconds")
        print(f">> bigvgan_time: {total * 0.1:.2f} seconds")
        print(f">> Total inference time: {total:.2f} seconds")
        print(f">> Generated audio length: {total_seconds:.2f} seconds")
        sys.stdout.flush()
        return output_path
