"""IndexTTS-2 and IndexTTS-2.5 as dubstudio's hosts load them: one IndexTTS2 instance
(indextts.infer_v2, or indextts.infer_v2_5 for 2.5) behind the protocol backend, its caps
below the model's position tables, and the languages each release speaks.

Speaker conditioning is cached in files keyed by the reference audio's SHA-256 and the
model version: /prepare computes it once and saves the tensors the IndexTTS2 instance
keeps in its cache slot; later requests restore them into the slot instead of running
the semantic encoder, codec, CAMPPlus and length regulator again.

Two hosts share it: indextts_host.py (protocol 1, one request at a time) and
indextts_batching.py (protocol 2, `indextts_host.py --batch`), which loads the model
through IndexTTSBackend and runs its modules batched.
"""

import contextlib
import importlib
import inspect
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import indextts_check  # noqa: E402
import protocol  # noqa: E402 (the shared module lives next to this file)
from protocol import HostError, invalid, require_file  # noqa: E402

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

# Caps below the GPT's position tables (config.yaml: gpt.max_mel_tokens 1815,
# gpt.max_text_tokens 600), where CUDA raises a device-side assert that leaves the process
# unusable. 1500 mel tokens is IndexTTS's own default (about 30 s at 50 a second); 200
# text tokens per segment is the top of the range upstream recommends (80-200). A request
# asking for more gets the cap; the config's own limits lower them further.
MAX_MEL_TOKENS_CAP = 1500
MAX_TEXT_TOKENS_PER_SEGMENT_CAP = 200

# The languages each release has a text front end for (infer_v2_5.py normalizes zh, en,
# zhen, ja and es; any other code falls back to a generic "common" embedding with
# degraded speech). IndexTTS-2's BPE vocabulary is Chinese and English.
LANGUAGES = {"2": ("zh", "en"), "2.5": ("zh", "en", "ja", "es", "zhen")}
LANGUAGE_ALIASES = {"cmn": "zh", "zho": "zh", "chi": "zh", "mandarin": "zh", "eng": "en", "jpn": "ja",
                    "spa": "es", "zh-en": "zhen", "en-zh": "zhen", "mixed": "zhen"}


def model_language(variant, code, text=""):
    """Maps a language code ("en-US", "zh_CN", "ja-JP", "cmn") to the one the release
    knows, or raises an unsupported error naming the codes it knows. An empty code is
    guessed from the text (Chinese characters: zh, else en)."""
    known = LANGUAGES[variant]
    raw = (code or "").strip()
    if not raw:
        return "zh" if any("\u4e00" <= c <= "\u9fff" for c in text) else "en"
    c = raw.lower().replace("_", "-")
    c = LANGUAGE_ALIASES.get(c, c)
    if c not in known:
        base = c.split("-", 1)[0]
        c = LANGUAGE_ALIASES.get(base, base)
    if c not in known:
        raise HostError(protocol.UNSUPPORTED, f"IndexTTS-{variant} does not speak language {raw!r}; "
                                              f"it knows {', '.join(known)}")
    return c


class TooLong(HostError):
    """A line that cannot be spoken within the caps: failing is better than a device-side
    assert or a take cut off mid-word."""

    def __init__(self, message):
        super().__init__(protocol.TEXT_TOO_LONG, message)


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
        # The limits of the request running now, read by the inference_speech wrapper.
        self.limits = None
        self.max_mel_cap = MAX_MEL_TOKENS_CAP
        self.max_segment_cap = MAX_TEXT_TOKENS_PER_SEGMENT_CAP
        self.text_positions = None
        self.checks = []
        # The conditioning restored last: {"path", "reference", "tensors"} (on the device).
        self.current = None

    # -- loading -----------------------------------------------------------------------

    def check(self):
        """The install check a host runs before loading; raises on a failure, with the
        doctor's lines on stderr."""
        self.checks = indextts_check.check_install(self.opts.model_dir, self.variant, self.opts.cfg,
                                                   qwen_emo=self.opts.qwen_emo, cuda_kernel=self.opts.cuda_kernel,
                                                   startup=True, device=self.opts.device)
        bad = indextts_check.failed(self.checks)
        for r in self.checks:
            if r.status in (indextts_check.FAIL, indextts_check.WARN):
                print("host: check " + r.line(), file=sys.stderr)
        if bad:
            raise indextts_check.CheckError(self.checks)
        cfg = indextts_check.read_config(self.opts.cfg or os.path.join(self.opts.model_dir, "config.yaml"))
        gpt = cfg.get("gpt") or {}
        # Never past the config's own tables; keep the mel cap a little inside it (the
        # table also holds the start and stop tokens and the conditioning input).
        if "max_mel_tokens" in gpt:
            self.max_mel_cap = min(MAX_MEL_TOKENS_CAP, int(gpt["max_mel_tokens"]))
        if "max_text_tokens" in gpt:
            self.text_positions = int(gpt["max_text_tokens"])
            self.max_segment_cap = min(MAX_TEXT_TOKENS_PER_SEGMENT_CAP, self.text_positions)

    def load(self):
        self.check()
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
            "use_torch_compile": self.opts.torch_compile or None,
        }
        for name, value in optional.items():
            if value is not None and name in params:
                kwargs[name] = value
        self.tts = cls(**kwargs)
        # IndexTTS2 compiles s2mel's CFM estimator (torch.compile, dynamic shapes); an
        # IndexTTS without the parameter runs it as it is.
        self.torch_compile = "use_torch_compile" in kwargs
        self.infer_params = inspect.signature(self.tts.infer).parameters
        self._watch_gpt()
        print(f"host: BigVGAN runs on {self.kernel()}", file=sys.stderr)

    def kernel(self):
        """Which BigVGAN activation runs: IndexTTS2 sets use_cuda_kernel False when the
        fused kernel did not build (it falls back to plain torch)."""
        return "cuda" if getattr(self.tts, "use_cuda_kernel", False) else "torch"

    def _watch_gpt(self):
        """Wraps the GPT's inference_speech on this instance, which infer() calls once per
        segment with the segment's text tokens: it refuses a segment longer than the
        text position table before CUDA sees it, counts the mel codes up to the stop
        token (infer() only prints timings), and fails a segment whose speech ran to
        max_mel_tokens without a stop token (a take cut off mid-word)."""
        gpt = getattr(self.tts, "gpt", None)
        inner = getattr(gpt, "inference_speech", None)
        if inner is None:
            return
        stop = getattr(self.tts, "stop_mel_token", None)

        def watched(*args, **kwargs):
            limits = self.limits or {}
            text_tokens = args[1] if len(args) > 1 else kwargs.get("text_inputs")
            n = _last_dim(text_tokens)
            if self.text_positions and n is not None and n > self.text_positions:
                raise TooLong(f"a segment of this line has {n} text tokens, more than the model's "
                              f"{self.text_positions}: split the line at a sentence end")
            out = inner(*args, **kwargs)
            row = _first_row(out[0])
            if row is None:
                return out
            count = row.index(stop) if stop is not None and stop in row else len(row)
            self.tokens += count
            cap = kwargs.get("max_generate_length") or limits.get("max_mel_tokens")
            if stop is not None and stop not in row and cap and len(row) >= cap:
                raise TooLong(f"the speech of one segment of this line reached max_mel_tokens ({cap}, about "
                              f"{cap / (25 if self.variant == '2.5' else 50):.0f} s) without ending: "
                              "split the line into shorter ones")
            return out

        with contextlib.suppress(Exception):
            object.__setattr__(gpt, "inference_speech", watched)

    def info(self):
        return {
            "model": self.model_name,
            "version": self.version,
            "sample_rate": 22050,
            "duration_control": self.variant == "2.5",
            "emotion_text": getattr(self.tts, "qwen_emo", None) is not None,
            "bigvgan_kernel": self.kernel(),
            "torch_compile": self.torch_compile,
            "max_mel_tokens": self.max_mel_cap,
            "max_text_tokens_per_segment": self.max_segment_cap,
            "languages": list(LANGUAGES[self.variant]),
        }

    def on_oom(self):
        """Drops the instance's conditioning cache slot (and our copy of it): after an
        out-of-memory error the speaker's tensors are the memory we can give back; the
        next request restores them from their cache file or recomputes them."""
        for a in SPEAKER_ATTRS + EMOTION_ATTRS:
            setattr(self.tts, a, None)
        self.tts.cache_spk_audio_prompt = None
        self.tts.cache_emo_audio_prompt = None
        self.current = None

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
        held = getattr(self.tts, "cache_spk_cond", None) is not None
        for attr in SPEAKER_ATTRS + EMOTION_ATTRS:
            setattr(self.tts, attr, None)
        self.tts.cache_spk_audio_prompt = None
        self.tts.cache_emo_audio_prompt = None
        if held:
            # What infer() does when the speaker changes; clearing the slot first would
            # otherwise skip it and keep the old speaker's blocks reserved.
            self._empty_cache()
        self.limits = {"max_mel_tokens": WARMUP_MEL_TOKENS}
        with tempfile.TemporaryDirectory(prefix="dubstudio-warmup-") as tmp:
            kwargs = {"spk_audio_prompt": ref, "text": WARMUP_TEXT[self.variant],
                      "output_path": os.path.join(tmp, "warmup.wav"), "max_mel_tokens": WARMUP_MEL_TOKENS}
            if self.variant == "2.5":
                kwargs["lang"] = "en"
            with protocol.capture_stages({}):
                try:
                    self.tts.infer(**kwargs)
                except TooLong:
                    pass  # the warm-up's audio is thrown away; the slot is what counts
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
            changed = self.tts.cache_spk_cond is not None
            for a in SPEAKER_ATTRS:
                setattr(self.tts, a, cur["tensors"][a])
            self.tts.cache_spk_audio_prompt = cur["reference"]
            if changed:
                self._empty_cache()  # as infer() does on a speaker change
        if speaker_emotion and "cache_emo_cond" in cur["tensors"] and \
                getattr(self.tts, "cache_emo_audio_prompt", None) != cur["reference"]:
            self.tts.cache_emo_cond = cur["tensors"]["cache_emo_cond"]
            self.tts.cache_emo_audio_prompt = cur["reference"]

    def _empty_cache(self):
        cuda = getattr(self.torch, "cuda", None)
        with contextlib.suppress(Exception):
            if cuda is not None and cuda.is_available():
                cuda.empty_cache()

    # -- synthesis ---------------------------------------------------------------------

    def synthesize(self, req):
        lang = model_language(self.variant, req.language, req.text)
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
        max_mel = min(req.max_mel_tokens, self.max_mel_cap)
        max_segment = min(req.max_text_tokens_per_segment, self.max_segment_cap)
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
            "max_text_tokens_per_segment": max_segment,
            "max_mel_tokens": max_mel,
        }
        if req.seed and "seed" in self.infer_params:
            kwargs["seed"] = req.seed  # 2.5 seeds itself too; the same seed as above
        factor = 1.0
        if self.variant == "2.5":
            kwargs["lang"] = lang
            factor = req.duration_factor or 1.0
            kwargs["duration_factor"] = factor
        self.tokens = 0
        self.limits = {"max_mel_tokens": max_mel}
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


def _last_dim(t):
    with contextlib.suppress(Exception):
        return int(t.shape[-1])
    return None


def _first_row(codes):
    """The first sequence of a [batch, time] tensor of codes, as a list."""
    with contextlib.suppress(Exception):
        rows = codes.tolist()
        return rows[0] if rows and isinstance(rows[0], list) else rows
    return None
