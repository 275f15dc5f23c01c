"""IndexTTS-2 and IndexTTS-2.5 behind the batching core (batching.py): the adapter that
`indextts_host.py --batch` serves (protocol version 2).

It is built on the IndexTTS2 instance's own modules, loaded as the one-request host
loads them (indextts_model.IndexTTSBackend: the install check, then
indextts.infer_v2.IndexTTS2 or infer_v2_5.IndexTTS2), and does with them what
IndexTTS2.infer does, per line instead of per process:

    conditioning  tts.extract_features + tts.semantic_model (hidden state 17, normalised
                  by semantic_mean/std), tts.semantic_codec.quantize, tts.mel_fn,
                  CAMPPlus over kaldi fbank, s2mel's length regulator for the prompt;
                  the emotion: merge_emovec of the speaker and the emotion audio with
                  emo_alpha, or an emotion vector (or Qwen's, from text) mixed through
                  tts.emo_matrix / spk_matrix as infer does; the GPT's conditioning
                  latents (get_conditioning and the two speed embeddings; 2.5: the
                  CAMPPlus style through spk_emb_proj and two zero rows) once per
                  speaker and emotion, kept for the last --speakers of them
    text          tts.tokenizer (its normaliser inside): tokenize, split_segments,
                  convert_tokens_to_ids; each segment is one GPT sequence
    gpt           UnifiedVoice's GPT-2 layers split around attention (ln_1, attn.c_attn
                  before; attn.c_proj, ln_2, mlp after), so the core keeps the KV in its
                  paged pool: the prompt is [conditioning][start text, text, stop text]
                  [start mel] (text positions from 0, mel positions from 0 at the start
                  token, as GPT2InferenceModel numbers them); logits are
                  mel_head(final_norm(ln_f(h))); the core's beam search stops a sequence
                  at stop_mel_token
    latents       the second pass (UnifiedVoice.forward's arithmetic) for several
                  sequences at once, right-padded under causal attention
    s2mel         gpt_layer, semantic_codec.quantizer.vq2emb, length_regulator (1.72
                  frames per code; 2.5: times duration_factor), then the CFM's Euler
                  steps with classifier-free guidance (rate 0.7, 25 steps) for several
                  lines in one estimator call: frames padded, x_lens per line (the DiT
                  masks past them), each line's noise from its seed
    vocoder       tts.bigvgan over the group, padded, each line cut to its frames

Not yet run against real weights (docs/engines.md says what has): the tests drive it
with the stand-ins in testdata/standin/indextts/_modules.py.
"""

import contextlib
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import batching  # noqa: E402
import indextts_model  # noqa: E402
import protocol  # noqa: E402
from protocol import invalid, require_file  # noqa: E402

AUTO_KV_CACHE_SHARE = 0.4  # as bench_host's: the share of free memory the KV cache takes
# The activation probe at load: a line of this many seconds behind an 8 s prompt, as
# bench_host probes its model.
PROBE_SECONDS = 4.0
PROBE_PROMPT_SECONDS = 8.0
CFG_RATE = 0.7  # IndexTTS2.infer's inference_cfg_rate
FRAMES_PER_CODE = 1.72  # s2mel mel frames per GPT code
SPEAKER_KEYS = ("spk_cond", "style", "prompt_condition", "ref_mel")


def _torch():
    import torch  # noqa: PLC0415 (the module imports without torch)

    return torch


class LiveBytes:
    """Counts the bytes of the tensors that torch operations make while it is entered,
    as long as they live, and keeps the peak: what torch.cuda.max_memory_allocated
    measures, for a device without allocator statistics (the CPU the stand-in tests
    run on). Tensors that share a storage count once; an output in a storage that was
    there before (a view of a weight or of an input, an in-place update) counts
    nothing."""

    def __init__(self, torch):
        from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415
        from torch.utils._pytree import tree_flatten  # noqa: PLC0415

        counter = self
        self.torch, self.live, self.peak = torch, 0, 0
        self.refs, self.size = {}, {}

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                inputs = {counter._key(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
                for t in tree_flatten(out)[0]:
                    if isinstance(t, torch.Tensor):
                        counter._count(t, inputs)
                return out

        self.mode = Mode()

    @staticmethod
    def _storage(t):
        return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()

    def _key(self, t):
        return self._storage(t).data_ptr()

    def _count(self, t, inputs):
        import weakref  # noqa: PLC0415

        st = self._storage(t)
        key = st.data_ptr()
        if key not in self.refs:
            if key in inputs:
                return  # not made here
            self.refs[key] = 0
            self.size[key] = st.nbytes()
            self.live += self.size[key]
            self.peak = max(self.peak, self.live)
        self.refs[key] += 1
        weakref.finalize(t, self._drop, key)

    def _drop(self, key):
        self.refs[key] -= 1
        if self.refs[key] == 0:
            del self.refs[key]
            self.live -= self.size.pop(key)

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


class _GPT2Layer:
    """One GPT-2 block (transformers' GPT2Block) split around its attention."""

    def __init__(self, blk, heads):
        self.b = blk
        self.heads = heads

    def qkv(self, x):
        b, t, d = x.shape
        q, k, v = self.b.attn.c_attn(self.b.ln_1(x)).split(d, dim=2)
        return tuple(y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))

    def finish(self, x, a):
        b, t, d = x.shape
        x = x + self.b.attn.c_proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.b.mlp(self.b.ln_2(x))


def most_similar_cosine(query, matrix):
    """The row of matrix most similar to query (infer_v2's find_most_similar_cosine)."""
    torch = _torch()
    sims = torch.nn.functional.cosine_similarity(query.float(), matrix.float(), dim=1)
    return int(torch.argmax(sims))


class IndexTTSAdapter:
    engine = "indextts"

    def __init__(self, opts, speakers=16):
        self.opts = opts
        self.backend = indextts_model.IndexTTSBackend(opts)
        self.variant = opts.variant
        self.version = self.backend.version
        self.speakers = speakers
        self.diffusion_steps = opts.diffusion_steps
        self.return_codes = bool(getattr(opts, "return_codes", False))
        self.audio = {}  # reference path -> speaker tensors (SPEAKER_KEYS)
        self.emo = {}  # emotion audio path -> its semantic features
        self.conds = {}  # (reference, emotion) -> GPT conditioning latents

    # -- loading -----------------------------------------------------------------------

    def load(self):
        torch = _torch()
        self.torch = torch
        self.backend.load()
        tts = self.tts = self.backend.tts
        gpt = self.gpt = tts.gpt
        self.store = protocol.ConditioningStore(self.version, torch)
        self.device = torch.device(tts.device)
        self.sample_rate = 22050
        self.layers = len(gpt.gpt.h)
        self.heads = gpt.heads
        self.head_dim = gpt.model_dim // gpt.heads
        # fp16 (2) or bf16 (2.5) autocast on CUDA, as infer runs the GPT; fp32 otherwise.
        self.dtype = tts.dtype if (tts.dtype is not None and self.device.type == "cuda") else torch.float32
        self.kv_dtype = self.dtype
        self.vocab = gpt.number_mel_codes
        self.stop_token = gpt.stop_mel_token
        self.campplus = getattr(gpt, "spk_cond_mode", "conformer") == "campplus"
        cond_len = (1 if self.campplus else gpt.cond_num) + 2
        self.prefix_tokens = cond_len + 3  # start text, stop text, start mel
        self.max_positions = self.prefix_tokens + gpt.max_text_tokens + gpt.max_mel_tokens + 1
        self.tokens_per_second = 25 if self.variant == "2.5" else 50
        self.layers_list = [_GPT2Layer(blk, self.heads) for blk in gpt.gpt.h]
        self.hop = getattr(getattr(tts.bigvgan, "h", None), "hop_size", 256)
        # --s2mel-dtype bf16 casts the CFM's estimator (the DiT) only, as vllm-omni runs
        # IndexTTS-2: the Euler updates, s2mel's conditioning (gpt_layer, length
        # regulator, codec) and BigVGAN stay fp32. The estimator then runs under bf16
        # autocast, which reconciles the fp32 tensors it makes itself (its timestep
        # embedding) with its bf16 weights.
        self.s2mel_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[getattr(self.opts, "s2mel_dtype", "fp32")]
        if self.s2mel_dtype != torch.float32:
            tts.s2mel.models["cfm"].estimator.to(self.s2mel_dtype)
        self.activation_bytes_per_second = self._probe_activations()

    def info(self):
        return {**self.backend.info(), "batching": True, "s2mel_dtype": getattr(self.opts, "s2mel_dtype", "fp32")}

    def vocoder_kernel(self):
        """BigVGAN's activations ("cuda": its fused kernel, or "torch") and why not the
        kernel where --cuda-kernel asked for it: IndexTTS2 falls back when it does not
        build, without saying why (`dubstudio doctor` does)."""
        kernel = self.backend.kernel()
        if self.opts.cuda_kernel and kernel != "cuda":
            return kernel, "BigVGAN's CUDA kernel did not build; IndexTTS fell back to plain torch (dubstudio doctor says why)"
        return kernel, ""

    def _dit_context(self):
        if self.s2mel_dtype == self.torch.float32:
            return contextlib.nullcontext()
        return self.torch.autocast(self.device.type, dtype=self.s2mel_dtype)

    def _probe_activations(self):
        """Activation bytes per audio second of one line through s2mel and the vocoder,
        measured once at load on a PROBE_SECONDS line behind a PROBE_PROMPT_SECONDS
        prompt, through this adapter's own CFMTable and vocoder_batch: the peak
        allocated beyond what was there (CUDA), or the peak of the tensors alive
        (elsewhere, LiveBytes). The executor charges it per audio second from the first
        line; calibration measures the real figure by length later."""
        torch, tts, gpt = self.torch, self.tts, self.gpt
        models = tts.s2mel.models
        n = int(PROBE_SECONDS * self.tokens_per_second)
        top = min(self.stop_token, gpt.start_mel_token)
        g = torch.Generator(device="cpu").manual_seed(0)
        with torch.inference_mode():
            prompt_codes = torch.randint(0, top, (1, int(PROBE_PROMPT_SECONDS * self.tokens_per_second)), generator=g)
            prompt_frames = int(PROBE_PROMPT_SECONDS * self.sample_rate / self.hop)
            s_ref = tts.semantic_codec.quantizer.vq2emb(prompt_codes.to(self.device).unsqueeze(1)).transpose(1, 2)
            prompt = models["length_regulator"](s_ref, ylens=torch.LongTensor([prompt_frames]).to(self.device),
                                                n_quantizers=3, f0=None)[0]
            style = tts.campplus_model(torch.randn(1, 200, 80, generator=g).to(self.device))
            cond = {"prompt_condition": prompt, "ref_mel": torch.randn(1, 80, prompt_frames, generator=g).to(self.device),
                    "style": style, "factor": 1.0}
            codes = torch.randint(0, top, (1, n), generator=g).to(self.device)
            latent = torch.randn(1, n, gpt.model_dim, generator=g).to(self.device)

            def line():
                table = CFMTable(self, self.diffusion_steps)
                mels = table.run([batching.S2MelRow(None, r, r.frames) for r in table.rows([(cond, latent, codes, 0)])])
                self.vocoder_batch(mels)

            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
                base = torch.cuda.memory_allocated(self.device)
                torch.cuda.reset_peak_memory_stats(self.device)
                line()
                torch.cuda.synchronize(self.device)
                peak = torch.cuda.max_memory_allocated(self.device) - base
                torch.cuda.empty_cache()
            else:
                with LiveBytes(torch) as live:
                    line()
                peak = live.peak
        return int(max(0, peak) / PROBE_SECONDS)

    def gpt_context(self):
        if self.dtype == self.torch.float32:
            return contextlib.nullcontext()
        return self.torch.autocast(self.device.type, dtype=self.dtype)

    def default_kv_cache_bytes(self):
        if self.device.type == "cuda":
            free, _ = self.torch.cuda.mem_get_info(self.device)
            return int(free * AUTO_KV_CACHE_SHARE)
        return 64 << 20

    def check(self, req):
        indextts_model.model_language(self.variant, req.language, req.text)
        require_file(req.reference_audio_path, "reference audio")
        emo = req.emotion
        if emo.mode == "audio":
            require_file(emo.audio_path, "emotion reference audio")
        if emo.mode == "text" and getattr(self.tts, "qwen_emo", None) is None:
            raise invalid("emotion from text needs the Qwen emotion model (start the host with --qwen-emo)")

    # -- conditioning (on the GPT thread) --------------------------------------------

    def _semantic(self, audio_16k):
        tts = self.tts
        inputs = tts.extract_features(audio_16k, sampling_rate=16000, return_tensors="pt")
        feats = inputs["input_features"].to(self.device)
        mask = inputs["attention_mask"].to(self.device)
        out = tts.semantic_model(input_features=feats, attention_mask=mask, output_hidden_states=True)
        return (out.hidden_states[17] - tts.semantic_mean) / tts.semantic_std

    def _speaker(self, ref):
        """IndexTTS2.infer's speaker block: the tensors of its cache slot."""
        import torchaudio  # noqa: PLC0415

        torch, tts = self.torch, self.tts
        audio, sr = tts._load_and_cut_audio(ref, 15, False)
        audio_22k = torchaudio.transforms.Resample(sr, 22050)(audio)
        audio_16k = torchaudio.transforms.Resample(sr, 16000)(audio)
        spk_cond = self._semantic(audio_16k)
        _, s_ref = tts.semantic_codec.quantize(spk_cond)
        ref_mel = tts.mel_fn(audio_22k.to(spk_cond.device).float())
        lens = torch.LongTensor([ref_mel.size(2)]).to(ref_mel.device)
        feat = torchaudio.compliance.kaldi.fbank(audio_16k.to(ref_mel.device), num_mel_bins=80, dither=0,
                                                 sample_frequency=16000)
        feat = feat - feat.mean(dim=0, keepdim=True)
        style = tts.campplus_model(feat.unsqueeze(0))
        prompt = tts.s2mel.models["length_regulator"](s_ref, ylens=lens, n_quantizers=3, f0=None)[0]
        return {"spk_cond": spk_cond, "style": style, "prompt_condition": prompt, "ref_mel": ref_mel}

    def _emotion_audio(self, path):
        c = self.emo.get(path)
        if c is None:
            audio, _ = self.tts._load_and_cut_audio(path, 15, False, sr=16000)
            c = self._semantic(audio)
        self._keep(self.emo, path, c)
        return c

    def _keep(self, cache, key, value):
        cache.pop(key, None)
        cache[key] = value
        while len(cache) > self.speakers:
            cache.pop(next(iter(cache)))

    def prepare(self, body):
        import time  # noqa: PLC0415

        start = time.perf_counter()
        ref, sha, cache_dir = protocol.parse_prepare(body)
        require_file(ref, "reference audio")
        actual = protocol.sha256_file(ref)
        if sha and sha != actual:
            raise invalid(f"reference audio {ref} does not match its SHA-256")
        path = self.store.path(cache_dir, actual) if cache_dir else ""
        if path:
            loaded = self.store.load(path, self.device, SPEAKER_KEYS, actual)
            if loaded:
                self._keep(self.audio, ref, loaded[0])
                return {"cache_path": path, "computed": False, "seconds": time.perf_counter() - start}
        tensors = self._speaker(ref)
        if path:
            self.store.save(path, actual, tensors)
        self._keep(self.audio, ref, tensors)
        return {"cache_path": path, "computed": True, "seconds": time.perf_counter() - start}

    def conditioning(self, req):
        """The line's conditioning: its speaker's tensors, the GPT's conditioning
        latents for its speaker and emotion, its language and duration factor."""
        torch, tts, gpt = self.torch, self.tts, self.gpt
        ref = req.reference_audio_path
        spk = self.audio.get(ref)
        if spk is None and req.conditioning_path:
            loaded = self.store.load(req.conditioning_path, self.device, SPEAKER_KEYS)
            spk = loaded[0] if loaded else None
        if spk is None:
            spk = self._speaker(ref)
        self._keep(self.audio, ref, spk)
        emo = req.emotion
        key = (ref, emo.mode, emo.audio_path, round(emo.weight, 6), tuple(emo.vector or ()), emo.text,
               req.text if emo.mode == "text" and not emo.text else "")
        conds = self.conds.get(key)
        if conds is None:
            conds = self._gpt_conditioning(spk, req)
        self._keep(self.conds, key, conds)
        lang = None
        if self.variant == "2.5":
            code = indextts_model.model_language(self.variant, req.language, req.text)
            lang = torch.LongTensor([self._lang_token(code)]).to(self.device)
        return {**spk, "conds": conds, "lang": lang, "factor": (req.duration_factor or 1.0)
                if self.variant == "2.5" else 1.0, "language": req.language}

    def _module(self):
        """The module IndexTTS2 comes from (infer_v2_5 holds 2.5's text functions)."""
        return sys.modules[type(self.tts).__module__]

    def _lang_token(self, code):
        return self._module().lang_to_token(code)

    def _gpt_conditioning(self, spk, req):
        """What IndexTTS2.infer computes before inference_speech, and inference_speech's
        conds_latent: [1, C, D]."""
        torch, tts, gpt = self.torch, self.tts, self.gpt
        emo = req.emotion
        spk_cond = spk["spk_cond"]
        vector = None
        if emo.mode == "text":
            vector = list(tts.qwen_emo.inference(emo.text or req.text).values())
        elif emo.mode == "vector":
            vector = list(emo.vector)
        alpha = emo.weight
        if vector is not None:
            scale = max(0.0, min(1.0, alpha))
            if scale != 1.0:
                vector = [int(x * scale * 10000) / 10000 for x in vector]
        if emo.mode == "audio":
            emo_cond = self._emotion_audio(emo.audio_path)
        else:
            emo_cond = self._emotion_audio(req.reference_audio_path)
            alpha = 1.0
        with self.gpt_context():
            lens = torch.tensor([spk_cond.shape[-1]], device=self.device)
            emo_lens = torch.tensor([emo_cond.shape[-1]], device=self.device)
            emovec = gpt.merge_emovec(spk_cond, emo_cond, lens, emo_lens, alpha=alpha)
            if vector is not None:
                w = torch.tensor(vector, device=self.device)
                index = [most_similar_cosine(spk["style"], m) for m in tts.spk_matrix]
                mat = torch.cat([m[i].unsqueeze(0) for i, m in zip(index, tts.emo_matrix)], 0)
                emovec = (w.unsqueeze(1) * mat).sum(0).unsqueeze(0) + (1 - torch.sum(w)) * emovec
            if self.campplus:
                latent = gpt.spk_emb_proj(spk["style"]).unsqueeze(1)
                extra = torch.zeros(1, 2, gpt.model_dim, device=self.device, dtype=latent.dtype)
                conds = torch.cat((latent + emovec.unsqueeze(1), extra), 1)
            else:
                latent = gpt.get_conditioning(spk_cond.transpose(1, 2), lens)
                speed = torch.zeros(1, dtype=torch.long, device=self.device)
                conds = torch.cat((latent + emovec.unsqueeze(1), gpt.speed_emb(speed + 1).unsqueeze(1),
                                   gpt.speed_emb(speed).unsqueeze(1)), 1)
        return conds.to(self.dtype)

    def _texts_2_5(self, text, lang, max_seg):
        """2.5's text front end as infer_generator runs it (text_normalization on):
        token ids per segment, each led by the language's special token."""
        tts, mod = self.tts, self._module()
        tp = tts.text_process
        text = tp.clean_pattern.sub(lambda m: tp.char_rep_map[m.group()], text)
        if lang in ("zh", "zhen", "en"):
            text = tp.normalize(text)
        elif lang in ("ja", "es"):
            text = mod.nemo_text_normalize(text, lang)
        if lang in ("ja", "zh", "zhen", "en"):
            text = text.lower()
        if lang == "es":
            text = text.upper()
        text = mod.apply_pronunciation_annotations(text)
        if lang == "ja":
            text = tts.ja_text_process.process_ja_text(text)
        text = re.sub(r"<\|([^|]+)\|>", lambda m: f"<|{m.group(1).upper()}|>", text)
        if not text.strip():
            return []
        prefix = f"<|{lang}|> "
        return [tts.tokenizer.encode(prefix + seg, allowed_special="all")
                for seg in tts.split_text_by_tokens(text, max_seg, prefix)]

    def segments(self, req):
        """(text tokens [1, T], mel tokens at most, seconds) per segment, split as
        IndexTTS2.infer splits the text."""
        torch, tok, gpt = self.torch, self.tts.tokenizer, self.gpt
        max_seg = min(req.max_text_tokens_per_segment, self.backend.max_segment_cap)
        limit = min(req.max_mel_tokens, self.backend.max_mel_cap)
        if self.variant == "2.5":
            lang = indextts_model.model_language(self.variant, req.language, req.text)
            texts = self._texts_2_5(req.text, lang, max_seg)
        else:
            texts = [tok.convert_tokens_to_ids(seg) for seg in tok.split_segments(tok.tokenize(req.text), max_seg)]
        if not texts or not any(texts):
            raise invalid("the text has nothing to say")
        out = []
        for ids in texts:
            if len(ids) > gpt.max_text_tokens:
                raise invalid(f"a segment of {len(ids)} text tokens passes the model's {gpt.max_text_tokens}")
            secs = min(limit / self.tokens_per_second, max(0.5, len(ids) / 3.0))
            out.append((torch.tensor([ids], dtype=torch.long, device=self.device), limit, secs))
        return out

    # -- GPT pieces ------------------------------------------------------------------

    def _text_emb(self, cond, text_tokens):
        torch, gpt = self.torch, self.gpt
        t = torch.nn.functional.pad(text_tokens, (1, 0), value=gpt.start_text_token)
        t = torch.nn.functional.pad(t, (0, 1), value=gpt.stop_text_token)
        e = gpt.text_embedding(t) + gpt.text_pos_embedding.emb(torch.arange(t.shape[1], device=t.device))
        if cond.get("lang") is not None and self.campplus:
            e = e + gpt.lang_embedding(cond["lang"]).view(1, 1, -1)
        return e

    def embed_prefix(self, cond, text_tokens):
        torch, gpt = self.torch, self.gpt
        start = torch.tensor([[gpt.start_mel_token]], device=self.device)
        mel = gpt.mel_embedding(start) + gpt.mel_pos_embedding.emb(torch.zeros(1, 1, dtype=torch.long,
                                                                               device=self.device))
        return torch.cat([cond["conds"], self._text_emb(cond, text_tokens).to(self.dtype), mel.to(self.dtype)], dim=1)

    def embed_codes(self, tokens, positions):
        gpt = self.gpt
        return (gpt.mel_embedding(tokens) + gpt.mel_pos_embedding.emb(positions + 1)).to(self.dtype)

    def head(self, h):
        gpt = self.gpt
        return gpt.mel_head(gpt.final_norm(gpt.gpt.ln_f(h)))

    # -- the s2mel stage (its own thread and stream) ----------------------------------

    def _kept(self, tokens):
        """How many of a sequence's tokens (a list) s2mel reads: those before the first
        stop token (infer's code_lens); at least one."""
        n = tokens.index(self.stop_token) if self.stop_token in tokens else len(tokens)
        return max(1, n)

    def _trim(self, codes):
        """Codes up to the first stop token; at least one."""
        return codes[:, :self._kept(codes[0].tolist())]

    def _target_frames(self, n_codes, cond):
        return max(1, int(n_codes * FRAMES_PER_CODE * cond["factor"]))

    def s2mel_frames(self, cond, tokens):
        """The frames s2mel runs a sequence over: its reference's prompt and its target."""
        return cond["prompt_condition"].shape[1] + self._target_frames(self._kept(tokens), cond)

    def latents_batch(self, items):
        """UnifiedVoice.forward's latents for several sequences: final_norm of the hidden
        states at [start mel, codes[:-1]], right-padded, causal."""
        torch, gpt = self.torch, self.gpt
        with self.gpt_context():
            xs, ns = [], []
            for cond, text, codes in items:
                codes = self._trim(codes)
                n = codes.shape[1]
                pos = torch.arange(n - 1, device=codes.device)
                rest = self.embed_codes(codes[:, :n - 1], pos)
                xs.append(torch.cat([self.embed_prefix(cond, text), rest], dim=1)[0])
                ns.append(n)
            lens = [x.shape[0] for x in xs]
            x = torch.zeros(len(xs), max(lens), xs[0].shape[-1], dtype=xs[0].dtype, device=xs[0].device)
            for i, xi in enumerate(xs):
                x[i, :lens[i]] = xi
            h = gpt.final_norm(gpt.gpt(inputs_embeds=x, return_dict=True).last_hidden_state)
        return [h[i:i + 1, lens[i] - ns[i]:lens[i]] for i in range(len(items))]

    def s2mel_table(self):
        """A new batching.S2MelTable for s2mel (one per s2mel thread: each keeps its own rows and graphs)."""
        return CFMTable(self, self.diffusion_steps, most_rows=getattr(self.opts, "s2mel_batch", 16))

    def vocoder_batch(self, mels):
        torch = self.torch
        frames = [m.shape[-1] for m in mels]
        x = torch.zeros(len(mels), mels[0].shape[1], max(frames), device=mels[0].device)
        for i, m in enumerate(mels):
            x[i, :, :frames[i]] = m[0]
        wav = self.tts.bigvgan(x.float())
        return [wav[i:i + 1, :, :frames[i] * self.hop] for i in range(len(mels))]


class CFMRow:
    """One sequence's tensors for IndexTTS2's CFM (CFMTable's row): mu [T, D] (the
    prompt's condition and its target's), the reference mel [80, P], style [S] and x
    [1, 80, T] (its noise from seed, zero over the prompt)."""

    def __init__(self, torch, mu, ref_mel, style, seed, channels):
        self.mu, self.ref, self.style = mu[0], ref_mel[0], style[0]
        self.frames, self.prompt = mu.shape[1], ref_mel.shape[-1]
        g = torch.Generator(device="cpu").manual_seed(int(seed) & 0x7FFFFFFFFFFFFFFF)
        self.x = torch.randn(1, channels, self.frames, generator=g).to(mu.device)
        self.x[..., :self.prompt] = 0


class CFMTable(batching.S2MelTable):
    """IndexTTS2's CFM as a batching.S2MelTable: its solve_euler's Euler steps with
    classifier-free guidance, each row at its own time: x, the frames to generate
    (keep), then the estimator's prompt, style and mu in the DiT's dtype and the
    frames of each row (lens), each with its unconditional half (zeros, rows b to 2b).
    An empty slot counts one frame (none would leave its attention nothing to read)."""

    def __init__(self, adapter, steps, graphs=False, most_rows=16):
        super().__init__(steps, adapter.device, graphs, most_rows)
        self.a = adapter

    def rows(self, items):
        a, torch = self.a, self.a.torch
        models = a.tts.s2mel.models
        out = []
        for c, latent, codes, seed in items:
            codes = a._trim(codes)
            lat = models["gpt_layer"](latent.float())
            s_infer = a.tts.semantic_codec.quantizer.vq2emb(codes.unsqueeze(1)).transpose(1, 2) + lat
            target = torch.LongTensor([a._target_frames(codes.shape[1], c)]).to(a.device)
            cond = models["length_regulator"](s_infer, ylens=target, n_quantizers=3, f0=None)[0]
            mu = torch.cat([c["prompt_condition"], cond], dim=1)
            out.append(CFMRow(torch, mu, c["ref_mel"], c["style"].float(), seed, models["cfm"].in_channels))
        # The widths blank pads to: the style's and mu's, one for every row of a model.
        self.style_dim, self.mu_dim = out[0].style.shape[-1], out[0].mu.shape[-1]
        return out

    def blank(self, b, t):
        a, torch = self.a, self.a.torch
        cfm = a.tts.s2mel.models["cfm"]
        dev, dit = a.device, a.s2mel_dtype
        ch = cfm.in_channels
        return (torch.zeros(b, ch, t, device=dev), torch.zeros(b, 1, t, dtype=torch.bool, device=dev),
                torch.zeros(2 * b, ch, t, dtype=dit, device=dev), torch.zeros(2 * b, self.style_dim, dtype=dit, device=dev),
                torch.zeros(2 * b, t, self.mu_dim, dtype=dit, device=dev),
                torch.ones(2 * b, dtype=torch.long, device=dev))

    def put(self, inputs, i, row):
        x, keep, prompt2, style2, mu2, lens2 = inputs
        b, n, p = x.shape[0], row.frames, row.prompt
        self.clear(inputs, i)
        x[i, :, :n] = row.x[0]
        keep[i, :, p:n] = True
        prompt2[i, :, :p] = row.ref[:, :p]
        style2[i] = row.style
        mu2[i, :n] = row.mu
        lens2[i] = lens2[b + i] = n

    def clear(self, inputs, i):
        x, keep, prompt2, style2, mu2, lens2 = inputs
        b = x.shape[0]
        for t in (x[i], keep[i], prompt2[i], style2[i], mu2[i]):
            t.zero_()
        lens2[i] = lens2[b + i] = 1

    def x_of(self, inputs, i, row):
        return inputs[0][i:i + 1, :, :row.frames].clone()

    def flow(self, inputs, t, dt):
        a = self.a
        x, keep, prompt2, style2, mu2, lens2 = inputs
        cfm = a.tts.s2mel.models["cfm"]
        with a._dit_context():
            v = cfm.estimator(a.torch.cat([x, x]).to(a.s2mel_dtype), prompt2, lens2, a.torch.cat([t, t]), style2,
                              mu2).float()
        v_cond, v_uncond = v.chunk(2)
        return (x + dt[:, None, None] * ((1.0 + CFG_RATE) * v_cond - CFG_RATE * v_uncond)) * keep

    def mel(self, x, row):
        return x[..., row.prompt:]


def batching_host(opts):
    """The protocol-2 host for indextts_host's --batch and its settings."""
    if (opts.max_sequences < 1 or opts.beams < 1 or opts.kv_cache_bytes < 0 or opts.s2mel_batch < 1
            or not opts.s2mel_max_wait >= 0 or opts.diffusion_steps < 1):
        raise SystemExit("indextts_host: --max-sequences, --beams, --s2mel-batch and --diffusion-steps must be at "
                         "least 1, --kv-cache-bytes and --s2mel-max-wait not negative")
    return batching.BatchingHost(IndexTTSAdapter(opts), {
        "max_sequences": opts.max_sequences, "beams": opts.beams, "kv_cache_bytes": opts.kv_cache_bytes,
        "s2mel_batch": opts.s2mel_batch, "s2mel_max_wait": opts.s2mel_max_wait,
        **batching.decode_settings(opts, "indextts_host")})
