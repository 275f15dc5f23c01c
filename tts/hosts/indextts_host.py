#!/usr/bin/env python3
"""dubstudio model host for IndexTTS-2 and IndexTTS-2.5.

Wraps indextts.infer_v2.IndexTTS2 (or, with --variant 2.5, indextts.infer_v2_5.IndexTTS2)
behind the model-host protocol (protocol.py, docs/engines.md): one model, one request at
a time, on the GPU this process sees (pin it with CUDA_VISIBLE_DEVICES).

Speaker conditioning is cached in files keyed by the reference audio's SHA-256 and the
model version: /prepare computes it once and saves the tensors the IndexTTS2 instance
keeps in its cache slot; later requests restore them into the slot instead of running
the semantic encoder, codec, CAMPPlus and length regulator again.

Run it in IndexTTS's Python environment with the index-tts checkout on PYTHONPATH:

    CUDA_VISIBLE_DEVICES=0 HF_HUB_OFFLINE=1 python3 tts/hosts/indextts_host.py \
        --model-dir checkpoints --variant 2 --fp16 --socket /run/dubstudio/gpu0-0.sock
"""

import argparse
import contextlib
import importlib
import inspect
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import protocol  # noqa: E402 (the shared module lives next to this file)
from protocol import HostError, env, env_bool, invalid, require_file  # noqa: E402

# The instance's speaker cache slot, as infer_v2.py / infer_v2_5.py name it. Restoring
# these and cache_spk_audio_prompt makes infer() skip the speaker computation.
SPEAKER_ATTRS = ("cache_spk_cond", "cache_s2mel_style", "cache_s2mel_prompt", "cache_mel")
# The emotion slot: with no separate emotion audio, infer() uses the speaker's own audio
# as the emotion reference, so its embedding belongs to the speaker too.
EMOTION_ATTRS = ("cache_emo_cond",)
# A short utterance that makes infer() fill the cache slot; its audio is thrown away.
WARMUP_TEXT = {"2": "嗯。", "2.5": "Hmm."}
WARMUP_MEL_TOKENS = 40

VARIANTS = {
    "2": ("indextts.infer_v2", "IndexTTS-2"),
    "2.5": ("indextts.infer_v2_5", "IndexTTS-2.5"),
}


class IndexTTSBackend:
    """The protocol backend around one IndexTTS2 instance."""

    def __init__(self, opts):
        self.opts = opts
        self.variant = opts.variant
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}: want 2 or 2.5")
        self.module_name, self.model_name = VARIANTS[self.variant]
        self.version = opts.model_version or self.model_name
        self.tts = None
        self.torch = None
        self.tokens = 0
        # The conditioning restored last: {"path", "reference", "tensors"} (on the device).
        self.current = None

    # -- loading -----------------------------------------------------------------------

    def load(self):
        import torch  # noqa: PLC0415 (lazy: the protocol and tests work without it)

        self.torch = torch
        self.store = protocol.ConditioningStore(self.version, torch)
        module = importlib.import_module(self.module_name)
        cls = module.IndexTTS2
        params = inspect.signature(cls.__init__).parameters
        kwargs = {"cfg_path": self.opts.cfg or os.path.join(self.opts.model_dir, "config.yaml"),
                  "model_dir": self.opts.model_dir}
        if self.opts.fp16:
            # 2 calls it use_fp16 (GPT only), 2.5 use_bf16.
            kwargs["use_fp16" if "use_fp16" in params else "use_bf16"] = True
        optional = {
            "device": self.opts.device or None,
            "use_cuda_kernel": self.opts.cuda_kernel,
            "use_deepspeed": self.opts.deepspeed,
            "use_qwen_emo": self.opts.qwen_emo,
        }
        for name, value in optional.items():
            if value is not None and name in params:
                kwargs[name] = value
        self.tts = cls(**kwargs)
        self._count_tokens()

    def _count_tokens(self):
        """Wraps the GPT's inference_speech on this instance to count the mel codes it
        returns; infer() only prints timings, not token counts."""
        gpt = getattr(self.tts, "gpt", None)
        inner = getattr(gpt, "inference_speech", None)
        if inner is None:
            return

        def counting(*args, **kwargs):
            out = inner(*args, **kwargs)
            with contextlib.suppress(Exception):
                self.tokens += int(out[0].shape[-1])
            return out

        with contextlib.suppress(Exception):
            object.__setattr__(gpt, "inference_speech", counting)

    def info(self):
        return {
            "model": self.model_name,
            "version": self.version,
            "sample_rate": 22050,
            "duration_control": self.variant == "2.5",
            "emotion_text": getattr(self.tts, "qwen_emo", None) is not None,
        }

    def on_oom(self):
        # Intermediate tensors went with the exception; the cache slot stays valid.
        pass

    # -- speaker conditioning ----------------------------------------------------------

    def prepare(self, body):
        start = time.perf_counter()
        ref, sha, cache_dir = protocol.parse_prepare(body)
        require_file(ref, "reference audio")
        actual = protocol.sha256_file(ref)
        if sha and sha != actual:
            raise invalid(f"reference audio {ref} does not match its SHA-256")
        path = self.store.path(cache_dir, actual) if cache_dir else ""
        cur = self.current
        if cur and cur.get("sha") == actual and cur["reference"] == ref and (not path or cur["path"] == path):
            # Already in the instance (and, with a cache dir, already written).
            if not path or os.path.isfile(path):
                self._apply(speaker_emotion=True)
                return {"cache_path": path, "computed": False, "seconds": time.perf_counter() - start}
        if path and self._restore(path, ref, actual):
            return {"cache_path": path, "computed": False, "seconds": time.perf_counter() - start}
        tensors = self._compute(ref)
        if path:
            self.store.save(path, actual, tensors)
        self.current = {"path": path, "reference": ref, "sha": actual, "tensors": tensors}
        return {"cache_path": path, "computed": True, "seconds": time.perf_counter() - start}

    def _device(self):
        return getattr(self.tts, "device", "cpu")

    def _compute(self, ref):
        """Fills the instance's cache slot for ref by running a short utterance (IndexTTS2
        has no separate conditioning call) and returns the slot's tensors."""
        for attr in SPEAKER_ATTRS + EMOTION_ATTRS:
            setattr(self.tts, attr, None)
        self.tts.cache_spk_audio_prompt = None
        self.tts.cache_emo_audio_prompt = None
        with tempfile.TemporaryDirectory(prefix="dubstudio-warmup-") as tmp:
            kwargs = {"spk_audio_prompt": ref, "text": WARMUP_TEXT[self.variant],
                      "output_path": os.path.join(tmp, "warmup.wav"), "max_mel_tokens": WARMUP_MEL_TOKENS}
            if self.variant == "2.5":
                kwargs["lang"] = "en"
            with protocol.capture_stages({}):
                self.tts.infer(**kwargs)
        missing = [a for a in SPEAKER_ATTRS if getattr(self.tts, a, None) is None]
        if missing:
            raise RuntimeError(f"IndexTTS2 left its cache slot empty ({', '.join(missing)}): has infer() changed?")
        return {a: getattr(self.tts, a) for a in SPEAKER_ATTRS + EMOTION_ATTRS
                if getattr(self.tts, a, None) is not None}

    def _restore(self, path, ref, sha=None):
        loaded = self.store.load(path, self._device(), SPEAKER_ATTRS, sha)
        if loaded is None:
            return False
        tensors, sha = loaded
        self.current = {"path": path, "reference": ref, "sha": sha, "tensors": tensors}
        self._apply(speaker_emotion=True)
        return True

    def _apply(self, speaker_emotion):
        """Puts self.current into the instance's cache slot (pointer assignments)."""
        cur = self.current
        if getattr(self.tts, "cache_spk_audio_prompt", None) != cur["reference"] or self.tts.cache_spk_cond is None:
            for a in SPEAKER_ATTRS:
                setattr(self.tts, a, cur["tensors"][a])
            self.tts.cache_spk_audio_prompt = cur["reference"]
        if speaker_emotion and "cache_emo_cond" in cur["tensors"] and \
                getattr(self.tts, "cache_emo_audio_prompt", None) != cur["reference"]:
            self.tts.cache_emo_cond = cur["tensors"]["cache_emo_cond"]
            self.tts.cache_emo_audio_prompt = cur["reference"]

    # -- synthesis ---------------------------------------------------------------------

    def synthesize(self, req):
        ref = req.reference_audio_path
        require_file(ref, "reference audio")
        emo = req.emotion
        if emo.mode == "audio":
            require_file(emo.audio_path, "emotion reference audio")
        if emo.mode == "text" and getattr(self.tts, "qwen_emo", None) is None:
            raise invalid("emotion from text needs the Qwen emotion model (start the host with --qwen-emo)")

        stages = {}
        t0 = time.perf_counter()
        if req.conditioning_path:
            cur = self.current
            if not (cur and cur["path"] == req.conditioning_path and cur["reference"] == ref):
                if not self._restore(req.conditioning_path, ref):
                    print(f"host: conditioning {req.conditioning_path} unusable; IndexTTS will compute it",
                          file=sys.stderr)
                    self.current = None
            if self.current:
                self._apply(speaker_emotion=emo.mode in ("speaker", "vector", "text"))
        stages["conditioning"] = time.perf_counter() - t0

        if req.seed:
            protocol.Meter().seed(req.seed)
        out = req.output_path
        if os.path.dirname(out):
            os.makedirs(os.path.dirname(out), exist_ok=True)
        kwargs = {
            "spk_audio_prompt": ref,
            "text": req.text,
            "output_path": out,
            "emo_audio_prompt": emo.audio_path if emo.mode == "audio" else None,
            "emo_alpha": emo.weight,
            "emo_vector": emo.vector if emo.mode == "vector" else None,
            "use_emo_text": emo.mode == "text",
            "emo_text": (emo.text or None) if emo.mode == "text" else None,
            "max_text_tokens_per_segment": req.max_text_tokens_per_segment,
            "max_mel_tokens": req.max_mel_tokens,
        }
        factor = 1.0
        if self.variant == "2.5":
            kwargs["lang"] = (req.language or "zh").lower()
            factor = req.duration_factor or 1.0
            kwargs["duration_factor"] = factor
        self.tokens = 0
        with protocol.capture_stages(stages):
            self.tts.infer(**kwargs)
        return {
            "engine": "indextts",
            "model_version": self.version,
            "output_path": out,
            "tokens": self.tokens,
            "stages": stages,
            "duration_factor": factor,
        }


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", default=env("INDEXTTS_MODEL_DIR", "checkpoints"))
    p.add_argument("--cfg", default=env("INDEXTTS_CFG"), help="default: <model-dir>/config.yaml")
    p.add_argument("--variant", default=env("INDEXTTS_VARIANT", "2"), choices=sorted(VARIANTS))
    p.add_argument("--model-version", default=env("INDEXTTS_MODEL_VERSION"),
                   help="version string for /health and cache keys (default IndexTTS-<variant>)")
    p.add_argument("--fp16", action="store_true", default=env_bool("INDEXTTS_FP16", False),
                   help="half precision (2: use_fp16, 2.5: use_bf16)")
    p.add_argument("--cuda-kernel", dest="cuda_kernel", action="store_true", default=env_bool("INDEXTTS_CUDA_KERNEL"))
    p.add_argument("--no-cuda-kernel", dest="cuda_kernel", action="store_false")
    p.add_argument("--deepspeed", action="store_true", default=env_bool("INDEXTTS_DEEPSPEED", False))
    p.add_argument("--qwen-emo", dest="qwen_emo", action="store_true", default=env_bool("INDEXTTS_QWEN_EMO", False))
    p.add_argument("--no-qwen-emo", dest="qwen_emo", action="store_false")
    p.add_argument("--device", default=env("INDEXTTS_DEVICE"))
    protocol.add_listen_args(p)
    return p.parse_args(argv)


def main(argv=None):
    opts = parse_args(argv)
    return protocol.run_host(IndexTTSBackend(opts), opts)


if __name__ == "__main__":
    sys.exit(main())
