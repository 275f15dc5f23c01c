#!/usr/bin/env python3
"""dubstudio benchmark model host: IndexTTS-2's shape with random weights.

It speaks the model-host protocol (protocol.py, docs/engines.md) and runs the same
pipeline, at the same sizes and precisions, as IndexTTS-2, so that GPU memory and time
behave like the real model's without its weights:

    conditioning  w2v-BERT-2.0-sized conformer encoder (24 layers, 1024-d, ~580M
                  parameters, fp32) over the prompt, twice (speaker and emotion), a
                  CAMPPlus-sized style net and the length regulator; cached per speaker
                  like IndexTTS2's cache slot, and in files through /prepare
    gpt           GPT-2 decoder, 1280-d, 24 layers, 20 heads (fp16 by default), with its
                  conditioning conformers and perceiver, beam search (3 beams) with a KV
                  cache grown by concatenation and reordered every step, one host sync
                  per step, 50 mel tokens per second of audio
    gpt_forward   one full forward pass over conditioning + text + codes for the latents
    s2mel         flow-matching DiT, 512-d, 13 layers, plus a WaveNet post-net, 25 Euler
                  steps with classifier-free guidance (batch 2) over prompt + target mel
                  frames (1.72 per token), fp32
    vocoder       BigVGAN-v2-sized generator (1536 channels, 256x upsampling, anti-aliased
                  snake activations, ~112M parameters), fp32

Measured on one H200 (PyTorch 2.11, eager, 8 s prompt, fp16 GPT): 4.35 GB allocated
after load (1.39 billion parameters); extra peak allocated per request 138 MB at 2 s of
audio, 507 MB at 12 s, 1.17 GB at 30 s; NVML's figure for the process ratchets from
6,246 MiB to 8,380 MiB after a 30 s line and falls back to 5,410 MiB after
/release_cache. Warm
wall time 1.6 s for 2 s of audio, 6.9 s for 12 s, 20.7 s for 30 s (GPT decode about
13 ms a step); the first request at a new length is 3-7x slower while the caching
allocator grows.

The audio is noise. Its length is target_seconds when given (what calibration asks
for), else a guess from the text, times duration_factor; long text is split into
segments that run one after another, as in IndexTTS. torch is needed to serve; without
it the file still imports, so `python3 -m py_compile` and the unit tests work anywhere.

    python3 tts/hosts/bench_host.py --socket /run/dubstudio/bench0.sock
    python3 tts/hosts/bench_host.py --selftest           # tiny dimensions, CPU or GPU
    python3 tts/hosts/bench_host.py --selftest --full    # real dimensions, on the GPU

With --share-weights PATH, hosts on one GPU hold one copy of the weights: the lender
loads them and lends them over the Unix socket PATH (CUDA IPC handles), and the
borrowers map that copy instead of loading their own, each keeping its own CUDA
context, caches and activations. The lender must outlive the borrowers (a borrower
whose lender died fails its next request). --weights-role says which a host is:
dubstudio's pool starts one lender per GPU and the borrowers after it serves (lend,
borrow); with auto, the first host to take the lock file lends and later ones
borrow (the fixed pools of bench/gpu/compare.sh).
"""

import argparse
import contextlib
import dataclasses
import fcntl
import json
import math
import os
import pickle
import socket
import sys
import threading
import time
import wave

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import alias_free  # noqa: E402
import batching  # noqa: E402
import protocol  # noqa: E402
from batching import attention  # noqa: E402
from protocol import env, env_bool, invalid, require_file  # noqa: E402

try:  # torch is optional at import time: the file must load where it is absent
    import torch
    import torch.nn.functional as F
    from torch import nn

    _Module = nn.Module
except ImportError:  # pragma: no cover - exercised on machines without torch
    torch = None
    F = None
    nn = None
    _Module = object

SAMPLE_RATE = 22050
HOP = 256  # vocoder samples per mel frame
MEL_FRAMES_PER_TOKEN = 1.72  # as IndexTTS-2's s2mel: target_lengths = code_lens * 1.72
SEMANTIC_FPS = 50  # w2v-BERT feature frames per second (16 kHz, 320-sample stride)
MAX_PROMPT_SECONDS = 15  # IndexTTS cuts prompts to 15 s
# With --batch and no --kv-cache-bytes, the KV cache takes this share of the memory
# free after the weights load; the worker predicts the host's memory with the same
# share before the host reports it (gpu.AutoKVCacheShare).
AUTO_KV_CACHE_SHARE = 0.4


@dataclasses.dataclass
class Dims:
    """Model dimensions; the defaults are IndexTTS-2's."""

    gpt_dim: int = 1280
    gpt_layers: int = 24
    gpt_heads: int = 20
    text_vocab: int = 12000
    mel_vocab: int = 8194
    max_positions: int = 2400
    cond_latents: int = 32  # perceiver output length
    cond_dim: int = 512  # GPT conditioning conformers
    cond_layers: int = 6
    emo_cond_layers: int = 4
    semantic_dim: int = 1024  # w2v-BERT 2.0
    semantic_layers: int = 24
    semantic_heads: int = 16
    semantic_ffn: int = 4096
    semantic_in: int = 160  # SeamlessM4T features: 80 fbank bins stacked twice
    codebook: int = 8192
    dit_dim: int = 512
    dit_layers: int = 13
    dit_heads: int = 8
    wavenet_layers: int = 8
    style_dim: int = 192
    n_mels: int = 80
    voc_channels: int = 1536
    voc_rates: tuple = (4, 4, 2, 2, 2, 2)
    voc_kernels: tuple = (8, 8, 4, 4, 4, 4)
    voc_res_kernels: tuple = (3, 7, 11)
    voc_dilations: tuple = (1, 3, 5)

    @classmethod
    def tiny(cls):
        """Small enough for a CPU self-test; same structure."""
        return cls(gpt_dim=64, gpt_layers=2, gpt_heads=4, text_vocab=500, mel_vocab=300, max_positions=2400,
                   cond_latents=8, cond_dim=32, cond_layers=1, emo_cond_layers=1, semantic_dim=64,
                   semantic_layers=2, semantic_heads=4, semantic_ffn=128, codebook=300, dit_dim=32, dit_layers=2,
                   dit_heads=4, wavenet_layers=2, voc_channels=64)


# ---------------------------------------------------------------------------------------
# Modules (random weights)


def _init(module):
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)


class ConformerBlock(_Module):
    """Macaron FFN, self-attention, depthwise-conv module, FFN: w2v-BERT's block."""

    def __init__(self, dim, heads, ffn, kernel=31):
        super().__init__()
        self.heads = heads
        self.ff1 = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, ffn), nn.SiLU(), nn.Linear(ffn, dim))
        self.ln_att = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln_conv = nn.LayerNorm(dim)
        self.pw1 = nn.Conv1d(dim, 2 * dim, 1)
        self.dw = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.pw2 = nn.Conv1d(dim, dim, 1)
        self.ff2 = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, ffn), nn.SiLU(), nn.Linear(ffn, dim))
        self.ln_out = nn.LayerNorm(dim)

    def forward(self, x):
        b, t, d = x.shape
        x = x + 0.5 * self.ff1(x)
        q, k, v = self.qkv(self.ln_att(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.out(attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        c = self.pw1(self.ln_conv(x).transpose(1, 2))
        c = self.pw2(F.silu(self.dw(F.glu(c, dim=1))))
        x = x + c.transpose(1, 2)
        x = x + 0.5 * self.ff2(x)
        return self.ln_out(x)


class SemanticEncoder(_Module):
    """w2v-BERT-2.0-sized encoder; returns the 17th layer's output as IndexTTS uses it."""

    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d.semantic_in, d.semantic_dim)
        self.layers = nn.ModuleList(
            ConformerBlock(d.semantic_dim, d.semantic_heads, d.semantic_ffn) for _ in range(d.semantic_layers))
        self.pick = min(17, d.semantic_layers)

    def forward(self, feats):
        x = self.proj(feats)
        picked = x
        for i, layer in enumerate(self.layers, 1):
            x = layer(x)  # all layers run, as with output_hidden_states=True
            if i == self.pick:
                picked = x
        return picked


class StyleNet(_Module):
    """CAMPPlus-sized speaker embedding from 80-bin fbank frames."""

    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(80, 512, 5, padding=2), nn.ReLU(), nn.Conv1d(512, 512, 3, padding=1),
                                 nn.ReLU(), nn.Conv1d(512, 512, 3, padding=1), nn.ReLU())
        self.out = nn.Linear(1024, d.style_dim)

    def forward(self, fbank):
        h = self.net(fbank.transpose(1, 2))
        return self.out(torch.cat([h.mean(-1), h.std(-1)], dim=-1))


class LengthRegulator(_Module):
    """Interpolates semantic features to mel frames, then a conv stack to the DiT width."""

    def __init__(self, d, in_dim):
        super().__init__()
        self.inp = nn.Conv1d(in_dim, d.dit_dim, 1)
        self.blocks = nn.Sequential(*[m for _ in range(4) for m in
                                      (nn.Conv1d(d.dit_dim, d.dit_dim, 3, padding=1), nn.GroupNorm(1, d.dit_dim),
                                       nn.Mish())])

    def forward(self, x, frames):
        x = F.interpolate(self.inp(x.transpose(1, 2)), size=int(frames), mode="nearest")
        return self.blocks(x).transpose(1, 2)


class Perceiver(_Module):
    """Cross-attends learned latents to the conditioning sequence (UnifiedVoice's
    perceiver resampler)."""

    def __init__(self, d, in_dim):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(d.cond_latents, d.gpt_dim) * 0.02)
        self.kv = nn.Linear(in_dim, 2 * d.gpt_dim)
        self.q = nn.Linear(d.gpt_dim, d.gpt_dim)
        self.ff = nn.Sequential(nn.LayerNorm(d.gpt_dim), nn.Linear(d.gpt_dim, 4 * d.gpt_dim), nn.GELU(),
                                nn.Linear(4 * d.gpt_dim, d.gpt_dim))
        self.heads = d.gpt_heads

    def forward(self, x):
        b = x.shape[0]
        hd = self.latents.shape[-1] // self.heads
        q = self.q(self.latents).expand(b, -1, -1)
        k, v = self.kv(x).chunk(2, dim=-1)

        def split(t):
            return t.view(b, -1, self.heads, hd).transpose(1, 2)

        a = attention(split(q), split(k), split(v)).transpose(1, 2).reshape(b, -1, q.shape[-1])
        return a + self.ff(a)


class GPTBlock(_Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def forward(self, x, past=None):
        b, t, d = x.shape
        q, k, v = self.attn(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if past is not None:
            # HF GPT-2's legacy cache: concatenate, so the cache is copied every step.
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        a = attention(q, k, v, causal=past is None and t > 1)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        x = x + self.mlp(self.ln2(x))
        return x, (k, v)


class UnifiedVoice(_Module):
    """IndexTTS-2's GPT: conditioning conformers + perceivers, text and mel embeddings,
    a 24-layer GPT-2 decoder and a mel head."""

    def __init__(self, d):
        super().__init__()
        self.d = d
        self.cond_in = nn.Linear(d.semantic_dim, d.cond_dim)
        self.cond_enc = nn.Sequential(*[ConformerBlock(d.cond_dim, 8 if d.cond_dim % 8 == 0 else 4, 4 * d.cond_dim)
                                        for _ in range(d.cond_layers)])
        self.perceiver = Perceiver(d, d.cond_dim)
        self.emo_in = nn.Linear(d.semantic_dim, d.cond_dim)
        self.emo_enc = nn.Sequential(*[ConformerBlock(d.cond_dim, 8 if d.cond_dim % 8 == 0 else 4, 4 * d.cond_dim)
                                       for _ in range(d.emo_cond_layers)])
        self.emo_perceiver = Perceiver(d, d.cond_dim)
        self.text_emb = nn.Embedding(d.text_vocab, d.gpt_dim)
        self.mel_emb = nn.Embedding(d.mel_vocab, d.gpt_dim)
        self.text_pos = nn.Embedding(d.max_positions, d.gpt_dim)
        self.mel_pos = nn.Embedding(d.max_positions, d.gpt_dim)
        self.blocks = nn.ModuleList(GPTBlock(d.gpt_dim, d.gpt_heads) for _ in range(d.gpt_layers))
        self.ln_f = nn.LayerNorm(d.gpt_dim)
        self.head = nn.Linear(d.gpt_dim, d.mel_vocab)

    def conditioning(self, spk_cond, emo_cond):
        c = self.perceiver(self.cond_enc(self.cond_in(spk_cond)))
        e = self.emo_perceiver(self.emo_enc(self.emo_in(emo_cond))).mean(dim=1, keepdim=True)
        return c + e

    def prefix(self, cond, text_tokens):
        t = text_tokens.shape[1]
        pos = torch.arange(t, device=text_tokens.device)
        return torch.cat([cond, self.text_emb(text_tokens) + self.text_pos(pos)], dim=1)

    def run(self, x, past=None):
        new = []
        for i, blk in enumerate(self.blocks):
            x, kv = blk(x, None if past is None else past[i])
            new.append(kv)
        return self.ln_f(x), new

    def generate(self, cond, text_tokens, n_tokens, beams, stride=1, repetition_penalty=10.0):
        """Beam search for exactly n_tokens mel codes (random weights never emit the stop
        token, so the length is ours to choose). With stride k each step feeds and emits k
        tokens: the KV cache and every tensor reach the sizes of the one-token loop, in
        k times fewer steps (a faster stand-in with the same memory)."""
        x = self.prefix(cond, text_tokens).expand(beams, -1, -1)
        h, past = self.run(x)
        scores = torch.zeros(beams, device=x.device)
        scores[1:] = -1e9  # all beams start identical: let the first step fan out
        seqs = torch.empty(beams, 0, dtype=torch.long, device=x.device)
        tok = torch.zeros(beams, 1, dtype=torch.long, device=x.device)
        step = 0
        while step < n_tokens:
            if step:
                pos = torch.arange(step - tok.shape[1], step, device=x.device)
                h, past = self.run(self.mel_emb(tok) + self.mel_pos(pos), past)
            logits = self.head(h[:, -1]).float()
            if seqs.shape[1]:
                prev = logits.gather(1, seqs)
                logits = logits.scatter(1, seqs, torch.where(prev < 0, prev * repetition_penalty,
                                                             prev / repetition_penalty))
            logp = F.log_softmax(logits / 0.8, dim=-1) + scores[:, None]
            top, idx = logp.view(-1).topk(2 * beams)
            beam_idx = torch.div(idx[:beams], self.d.mel_vocab, rounding_mode="floor")
            k = min(max(stride, 1), n_tokens - step)
            tok = (idx[:beams] % self.d.mel_vocab)[:, None].expand(beams, k)
            scores = top[:beams]
            seqs = torch.cat([seqs.index_select(0, beam_idx), tok], dim=1)
            past = [(k_.index_select(0, beam_idx), v.index_select(0, beam_idx)) for k_, v in past]
            step += k
            # The stopping check syncs with the host every step, as in HF generate().
            if bool((tok == self.d.mel_vocab - 1).all()):
                break
        return seqs[:1]

    def latents(self, cond, text_tokens, codes):
        """The second pass: hidden states at the code positions, for s2mel."""
        pos = torch.arange(codes.shape[1], device=codes.device)
        x = torch.cat([self.prefix(cond, text_tokens), self.mel_emb(codes) + self.mel_pos(pos)], dim=1)
        h, _ = self.run(x)
        return h[:, -codes.shape[1]:]


class DiTBlock(_Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.SiLU(), nn.Linear(4 * dim, dim))
        self.ada = nn.Linear(dim, 2 * dim)

    def forward(self, x, c, mask=None):
        """mask [B, T] (True = a real frame) keeps padded frames of a batch out of
        every real frame's attention."""
        b, t, d = x.shape
        shift, scale = self.ada(c).unsqueeze(1).chunk(2, dim=-1)
        h = self.ln1(x) * (1 + scale) + shift
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        m = None if mask is None else mask[:, None, None, :]
        x = x + self.out(attention(q, k, v, mask=m).transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ln2(x))


class S2Mel(_Module):
    """Semantic-to-mel: gpt_layer, codebook, length regulator and the CFM DiT estimator."""

    def __init__(self, d):
        super().__init__()
        self.d = d
        self.gpt_layer = nn.Sequential(nn.Linear(d.gpt_dim, 256), nn.Linear(256, 128), nn.Linear(128, d.semantic_dim))
        self.codebook = nn.Embedding(d.codebook, d.semantic_dim)
        self.regulator = LengthRegulator(d, d.semantic_dim)
        self.inp = nn.Linear(2 * d.n_mels + d.dit_dim, d.dit_dim)
        self.t_emb = nn.Sequential(nn.Linear(256, d.dit_dim), nn.SiLU(), nn.Linear(d.dit_dim, d.dit_dim))
        self.style = nn.Linear(d.style_dim, d.dit_dim)
        self.blocks = nn.ModuleList(DiTBlock(d.dit_dim, d.dit_heads) for _ in range(d.dit_layers))
        self.wavenet = nn.ModuleList(nn.Conv1d(d.dit_dim, 2 * d.dit_dim, 5, padding=2) for _ in range(d.wavenet_layers))
        self.final = nn.Linear(d.dit_dim, d.n_mels)

    def condition(self, latent, codes, frames):
        s = self.codebook(codes.clamp(max=self.d.codebook - 1)) + self.gpt_layer(latent)
        return self.regulator(s, frames)

    def dit(self):
        """The flow-matching estimator's modules (what --s2mel-dtype bf16 casts)."""
        return (self.inp, self.t_emb, self.style, self.blocks, self.wavenet, self.final)

    def estimator(self, x, prompt, cond, style, t, mask=None):
        """The velocity of x at time t, in fp32 whatever the DiT's dtype (the Euler
        updates that accumulate it stay fp32)."""
        dt = self.inp.weight.dtype
        x, prompt, cond, style = x.to(dt), prompt.to(dt), cond.to(dt), style.to(dt)
        half = 128
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=x.device) / half)
        # t: one time for every row, or each row's own ([B]: a table's rows at their own steps).
        arg = t.reshape(-1, 1) * 1000 * freqs
        te = self.t_emb(torch.cat([torch.sin(arg), torch.cos(arg)], dim=-1).to(dt))
        c = te + self.style(style)
        h = self.inp(torch.cat([x.transpose(1, 2), prompt.transpose(1, 2), cond], dim=-1))
        for blk in self.blocks:
            h = blk(h, c, mask)
        w = h.transpose(1, 2)
        keep = None if mask is None else mask[:, None, :].to(w.dtype)
        for conv in self.wavenet:
            if keep is not None:
                w = w * keep  # padded frames read as zeros, as past the end of a lone line
            a, g = conv(w).chunk(2, dim=1)
            w = w + torch.tanh(a) * torch.sigmoid(g)
        return self.final(w.transpose(1, 2)).transpose(1, 2).float()

    def inference(self, cond, ref_mel, style, steps, cfg_rate=0.7):
        """Euler steps of flow matching with classifier-free guidance (batch of 2)."""
        b, frames, _ = cond.shape
        p = ref_mel.shape[-1]
        x = torch.randn(b, self.d.n_mels, frames, device=cond.device)
        prompt = torch.zeros_like(x)
        prompt[..., :p] = ref_mel
        x[..., :p] = 0
        ts = torch.linspace(0, 1, steps + 1, device=cond.device)
        # In the DiT's dtype once, not at each step (the estimator's casts are then no-ops).
        dit = self.inp.weight.dtype
        cond2 = torch.cat([cond, torch.zeros_like(cond)]).to(dit)
        prompt2 = torch.cat([prompt, torch.zeros_like(prompt)]).to(dit)
        style2 = torch.cat([style, torch.zeros_like(style)]).to(dit)
        for i in range(steps):
            t, dt = ts[i], ts[i + 1] - ts[i]
            v = self.estimator(torch.cat([x, x]), prompt2, cond2, style2, t)
            v_cond, v_uncond = v.chunk(2)
            x = x + dt * ((1 + cfg_rate) * v_cond - cfg_rate * v_uncond)
            x[..., :p] = 0
        return x


    def inference_batch(self, items, steps, cfg_rate=0.7):
        """inference for several lines at once: items are (cond [1, T, D], ref_mel
        [1, M, P], style [1, S], seed); frames are padded to the longest and masked,
        each line's noise comes from its own seed. Returns each line's target mel."""
        table = FlowTable(self, steps, items[0][0].device)
        return table.run([batching.S2MelRow(None, r, r.frames) for r in (FlowRow(self, *it) for it in items)])

    def flow_step(self, x, prompt2, cond2, style2, mask2, is_prompt, t, dt, cfg_rate=0.7):
        """One Euler step of every row from its time t by dt ([B] each), with
        classifier-free guidance. Only tensor work on the device: a CUDA graph records
        it as it is."""
        v = self.estimator(torch.cat([x, x]), prompt2, cond2, style2, torch.cat([t, t]), mask2)
        v_cond, v_uncond = v.chunk(2)
        step = dt[:, None, None] * ((1 + cfg_rate) * v_cond - cfg_rate * v_uncond)
        return (x + step).masked_fill(is_prompt, 0)


class FlowRow:
    """One sequence's s2mel tensors (batching.S2MelTable's row): its condition [T, D]
    (the prompt's and its target's), reference mel [M, P], style [S] and x [1, M, T]
    (its noise from seed, zero over the prompt)."""

    def __init__(self, s2, cond, ref_mel, style, seed):
        self.cond, self.ref, self.style = cond[0], ref_mel[0], style[0]
        self.frames, self.prompt = cond.shape[1], ref_mel.shape[-1]
        g = torch.Generator(device="cpu").manual_seed(int(seed) & 0x7FFFFFFFFFFFFFFF)
        self.x = torch.randn(1, s2.d.n_mels, self.frames, generator=g).to(cond.device)
        self.x[..., :self.prompt] = 0


class FlowTable(batching.S2MelTable):
    """The benchmark model's s2mel as a batching.S2MelTable: the inputs of S2Mel's
    flow_step, the prompt, condition and style in the DiT's dtype, each with its
    unconditional half (zeros, rows b to 2b) for classifier-free guidance. An empty
    slot attends to its first frame (to none, attention would give NaN); the frames
    of a row past its end are masked out."""

    def __init__(self, s2, steps, device, graphs=False, most_rows=16):
        super().__init__(steps, device, graphs, most_rows)
        self.s2 = s2

    def rows(self, items):
        s2, out = self.s2, []
        for c, latent, codes, seed in items:
            target = s2.condition(latent.float(), codes, int(codes.shape[1] * MEL_FRAMES_PER_TOKEN))
            out.append(FlowRow(s2, torch.cat([c["prompt_condition"], target], dim=1), c["ref_mel"], c["style"], seed))
        return out

    def blank(self, b, t):
        d, dev, dit = self.s2.d, self.device, self.s2.inp.weight.dtype
        mask2 = torch.zeros(2 * b, t, dtype=torch.bool, device=dev)
        mask2[:, 0] = True
        return (torch.zeros(b, d.n_mels, t, device=dev), torch.zeros(2 * b, d.n_mels, t, dtype=dit, device=dev),
                torch.zeros(2 * b, t, d.dit_dim, dtype=dit, device=dev),
                torch.zeros(2 * b, d.style_dim, dtype=dit, device=dev), mask2,
                torch.zeros(b, 1, t, dtype=torch.bool, device=dev))

    def put(self, inputs, i, row):
        x, prompt2, cond2, style2, mask2, is_prompt = inputs
        b, n, p = x.shape[0], row.frames, row.prompt
        self.clear(inputs, i)
        x[i, :, :n] = row.x[0]
        prompt2[i, :, :p] = row.ref
        cond2[i, :n] = row.cond
        style2[i] = row.style
        mask2[i, :n] = True
        mask2[b + i, :n] = True
        is_prompt[i, :, :p] = True

    def clear(self, inputs, i):
        x, prompt2, cond2, style2, mask2, is_prompt = inputs
        b = x.shape[0]
        for t in (x[i], prompt2[i], cond2[i], style2[i], mask2[i], mask2[b + i], is_prompt[i]):
            t.zero_()
        mask2[i, 0] = mask2[b + i, 0] = True

    def x_of(self, inputs, i, row):
        return inputs[0][i:i + 1, :, :row.frames].clone()

    def flow(self, inputs, t, dt):
        return self.s2.flow_step(*inputs, t, dt)

    def mel(self, x, row):
        return x[..., row.prompt:]


class AntiAliasSnake(_Module):
    """BigVGAN's alias-free activation: 2x upsample (12-tap filter), snake, 2x down;
    one kernel where fused (--vocoder-fused: alias_free.py)."""

    def __init__(self, ch):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, ch, 1))
        self.register_buffer("filt", torch.hann_window(12).view(1, 1, 12).repeat(ch, 1, 1) / 6, persistent=False)
        self.ch = ch
        self.fused = False

    def forward(self, x):
        return (alias_free.snake_resample if self.fused else alias_free.reference)(x, self.alpha, self.filt)


class AMPBlock(_Module):
    def __init__(self, ch, kernel, dilations):
        super().__init__()
        self.c1 = nn.ModuleList(nn.Conv1d(ch, ch, kernel, dilation=dl, padding=dl * (kernel - 1) // 2)
                                for dl in dilations)
        self.c2 = nn.ModuleList(nn.Conv1d(ch, ch, kernel, padding=(kernel - 1) // 2) for _ in dilations)
        self.a1 = nn.ModuleList(AntiAliasSnake(ch) for _ in dilations)
        self.a2 = nn.ModuleList(AntiAliasSnake(ch) for _ in dilations)

    def forward(self, x):
        for c1, c2, a1, a2 in zip(self.c1, self.c2, self.a1, self.a2):
            x = x + c2(a2(c1(a1(x))))
        return x


class Vocoder(_Module):
    """BigVGAN-v2-sized generator: 80 mel bins in, 256 samples per frame out."""

    def __init__(self, d):
        super().__init__()
        ch = d.voc_channels
        self.pre = nn.Conv1d(d.n_mels, ch, 7, padding=3)
        self.ups = nn.ModuleList()
        self.res = nn.ModuleList()
        for r, k in zip(d.voc_rates, d.voc_kernels):
            self.ups.append(nn.ConvTranspose1d(ch, ch // 2, k, stride=r, padding=(k - r) // 2))
            ch //= 2
            self.res.append(nn.ModuleList(AMPBlock(ch, rk, d.voc_dilations) for rk in d.voc_res_kernels))
        self.act = AntiAliasSnake(ch)
        self.post = nn.Conv1d(ch, 1, 7, padding=3)

    def forward(self, mel):
        x = self.pre(mel)
        for up, blocks in zip(self.ups, self.res):
            x = up(x)
            x = sum(b(x) for b in blocks) / len(blocks)
        return torch.clamp(self.post(self.act(x)), -1, 1)


# ---------------------------------------------------------------------------------------
# The backend


def natural_seconds(text):
    """A rough natural length: Chinese/Japanese/Korean characters at 4.2 a second, other
    words at 2.7 (tts.PredictNaturalSeconds is the careful version)."""
    cjk = sum(1 for ch in text if ord(ch) >= 0x2E80)
    words = len("".join(ch if ord(ch) < 0x2E80 else " " for ch in text).split())
    return max(0.3, cjk / 4.2 + words / 2.7)


def plan_segments(req, tokens_per_second):
    """The line's segments as IndexTTS splits long text: (text tokens, mel tokens to
    make, seconds) for each, the text spread evenly, the length target_seconds (else
    a guess from the text) times duration_factor."""
    seconds = (req.target_seconds or natural_seconds(req.text)) * (req.duration_factor or 1.0)
    n_text = text_token_count(req.text)
    n = max(1, math.ceil(n_text / req.max_text_tokens_per_segment))
    return [(n_text // n + (1 if i < n_text % n else 0),
             min(req.max_mel_tokens, max(2, round(seconds / n * tokens_per_second))), seconds / n) for i in range(n)]


def text_token_count(text):
    """About as many BPE tokens as IndexTTS's tokenizer makes."""
    cjk = sum(1 for ch in text if ord(ch) >= 0x2E80)
    rest = "".join(ch if ord(ch) < 0x2E80 else " " for ch in text)
    return max(1, cjk + sum(1 + len(w) // 4 for w in rest.split()))


def _assign(modules, name, tensor):
    """Puts tensor in place of the parameter or buffer called name ("gpt.blocks.0.w")
    in modules (a dict of the host's modules by their first name)."""
    first, *path, leaf = name.split(".")
    m = modules[first]
    for p in path:
        m = getattr(m, p)
    if leaf in m._parameters:
        m._parameters[leaf] = nn.Parameter(tensor, requires_grad=False)
    else:
        m._buffers[leaf] = tensor


class WeightShare:
    """One copy of the weights for the hosts on a GPU (--share-weights): the first
    host to take the lock file finds no lender and lends its own; the others borrow."""

    def __init__(self, path):
        self.path = path
        self.lock = open(path + ".lock", "a")

    def borrow(self, role="auto"):
        """Returns the lender's tensors by name, or None when this host must load
        the weights and lend them (it then holds the lock until lend()). Role lend
        never borrows; role borrow fails when no lender answers."""
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        if role == "lend":
            return None
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
        except (FileNotFoundError, ConnectionRefusedError):
            conn.close()
            if role == "borrow":
                fcntl.flock(self.lock, fcntl.LOCK_UN)
                raise RuntimeError(f"no host lends the weights at {self.path}")
            return None
        fcntl.flock(self.lock, fcntl.LOCK_UN)
        with conn:
            chunks = []
            while True:
                b = conn.recv(1 << 20)
                if not b:
                    break
                chunks.append(b)
        handles = pickle.loads(b"".join(chunks))
        return {name: fn(*args) for name, (fn, args) in handles.items()}

    def lend(self, modules):
        """Serves modules' parameters and buffers to borrowers, from a thread, for as
        long as the process lives."""
        from torch.multiprocessing.reductions import reduce_tensor

        handles = {}
        for first, m in modules.items():
            for name, t in list(m.named_parameters()) + list(m.named_buffers()):
                handles[f"{first}.{name}"] = reduce_tensor(t.detach())
        payload = pickle.dumps(handles)
        if os.path.exists(self.path):
            os.unlink(self.path)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(self.path)
        srv.listen(64)
        fcntl.flock(self.lock, fcntl.LOCK_UN)

        def serve():
            while True:
                conn, _ = srv.accept()
                with conn:
                    conn.sendall(payload)

        threading.Thread(target=serve, name="weight-share", daemon=True).start()


class BenchBackend:
    def __init__(self, opts, dims=None):
        self.opts = opts
        self.dims = dims or Dims()
        self.version = opts.model_version
        self.current = None  # {"sha", "reference", "tensors"}: the conditioning cache slot

    def _build(self, device):
        d = self.dims
        # torch.device as a context manager came with PyTorch 2.0; the CPU tests run on 1.13.
        place = torch.device(device) if hasattr(torch.device, "__enter__") else contextlib.nullcontext()
        with place:
            self.semantic = SemanticEncoder(d).eval()
            self.style = StyleNet(d).eval()
            self.gpt = UnifiedVoice(d).eval()
            self.s2mel = S2Mel(d).eval()
            self.vocoder = Vocoder(d).eval()
        return {"semantic": self.semantic, "style": self.style, "gpt": self.gpt, "s2mel": self.s2mel,
                "vocoder": self.vocoder}

    def load(self):
        if torch is None:
            raise RuntimeError("bench_host needs PyTorch")
        dev = self.opts.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.device(dev)
        if self.opts.tf32:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.gpt_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[self.opts.gpt_dtype]
        if self.device.type == "cpu" and self.gpt_dtype == torch.float16:
            self.gpt_dtype = torch.float32
        self.s2mel_dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[self.opts.s2mel_dtype]
        share = None
        if self.opts.share_weights:
            if self.device.type != "cuda":
                raise RuntimeError("--share-weights needs a CUDA device")
            share = WeightShare(self.opts.share_weights)
        tensors = share.borrow(self.opts.weights_role) if share else None
        if tensors is not None:
            modules = self._build("meta")
            for name, t in tensors.items():
                _assign(modules, name, t)
            # The lender's dtypes come with its tensors: a borrower asking for others
            # would silently run the lender's.
            got = (self.gpt.head.weight.dtype, self.s2mel.inp.weight.dtype)
            if got != (self.gpt_dtype, self.s2mel_dtype):
                raise RuntimeError(f"the lender's weights are {got[0]} (GPT) and {got[1]} (s2mel DiT); this host "
                                   f"asks for {self.gpt_dtype} and {self.s2mel_dtype}: start both with the same "
                                   f"--gpt-dtype and --s2mel-dtype")
        else:
            torch.manual_seed(self.opts.weight_seed)
            modules = self._build(self.device)
            for m in modules.values():
                _init(m)
            self.gpt.to(self.gpt_dtype)  # fp16 applies to the GPT only, as in IndexTTS-2
            # --s2mel-dtype bf16 casts the DiT only, as vllm-omni runs IndexTTS-2. The Euler
            # updates, s2mel's conditioning (codebook, regulator: caches keep one dtype)
            # and the vocoder (about 14% of s2mel's time here) stay fp32.
            for m in self.s2mel.dit():
                m.to(self.s2mel_dtype)
            if share:
                share.lend(modules)
        self._fuse()
        self._compile()
        self.store = protocol.ConditioningStore(self.version, torch)
        self.params = sum(p.numel() for m in (self.semantic, self.style, self.gpt, self.s2mel, self.vocoder)
                          for p in m.parameters())

    def _fuse(self):
        """--vocoder-fused: the vocoder's anti-aliased activations as one kernel each
        (alias_free.py) where its check passes on this device; otherwise the four steps,
        with the reason on stderr and in /health (vocoder_kernel_off)."""
        self.vocoder_kernel, self.vocoder_kernel_off = "torch", ""
        if not self.opts.vocoder_fused:
            return
        if self.opts.vocoder_compile:
            raise RuntimeError("--vocoder-fused and --vocoder-compile each replace the vocoder's activations: "
                               "choose one")
        self.vocoder_kernel_off = alias_free.check(self.device) or ""
        if self.vocoder_kernel_off:
            print(f"bench_host: the vocoder's activations run in four steps (--vocoder-fused: "
                  f"{self.vocoder_kernel_off})", file=sys.stderr, flush=True)
            return
        for m in self.vocoder.modules():
            if isinstance(m, AntiAliasSnake):
                m.fused = True
        self.vocoder_kernel = "fused"

    def _compile(self):
        """--s2mel-compile and --vocoder-compile: torch.compile over s2mel's estimator
        (IndexTTS2's use_torch_compile) and the vocoder, with dynamic shapes, so that
        their elementwise work runs in fused kernels. The first call of each compiles
        (the load's activation probe, on a batching host); a CUDA graph records the
        compiled kernels as it would the eager ones."""
        want = [name for name, on in (("s2mel", self.opts.s2mel_compile), ("vocoder", self.opts.vocoder_compile)) if on]
        if not want:
            return
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"--{want[0]}-compile needs PyTorch 2 or later (torch.compile); this is {torch.__version__}")
        if "s2mel" in want:
            self.s2mel.estimator = torch.compile(self.s2mel.estimator, dynamic=True)
        if "vocoder" in want:
            self.vocoder.forward = torch.compile(self.vocoder.forward, dynamic=True)

    def gpt_context(self):
        """fp16/bf16 autocast for the GPT, as IndexTTS-2 runs it; nothing in fp32 (where
        PyTorch 1.13's CPU autocast refuses even a disabled fp16 context)."""
        if self.gpt_dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.gpt_dtype)

    def info(self):
        info = {"model": "IndexTTS-2-bench", "version": self.version, "sample_rate": SAMPLE_RATE,
                "duration_control": True, "emotion_text": False, "vocoder_kernel": self.vocoder_kernel}
        if self.vocoder_kernel_off:
            info["vocoder_kernel_off"] = self.vocoder_kernel_off
        return info

    def on_oom(self):
        pass

    # -- conditioning ------------------------------------------------------------------

    def _compute(self, ref, sha):
        _, secs = protocol.wav_info(ref)
        secs = min(max(secs, 1.0), MAX_PROMPT_SECONDS)
        g = torch.Generator(device="cpu").manual_seed(int(sha[:8], 16))
        frames = int(secs * SEMANTIC_FPS)
        mel_frames = int(secs * SAMPLE_RATE / HOP)
        d = self.dims
        with torch.inference_mode():
            feats = torch.randn(1, frames, d.semantic_in, generator=g).to(self.device)
            spk = self.semantic(feats)
            emo = self.semantic(feats)  # IndexTTS encodes the prompt again as the emotion reference
            fbank = torch.randn(1, int(secs * 100), 80, generator=g).to(self.device)
            style = self.style(fbank)
            prompt = self.s2mel.regulator(spk, mel_frames)
            ref_mel = torch.randn(1, d.n_mels, mel_frames, generator=g).to(self.device)
        return {"spk_cond": spk, "emo_cond": emo, "style": style, "prompt_condition": prompt, "ref_mel": ref_mel}

    def prepare(self, body):
        start = time.perf_counter()
        ref, sha, cache_dir = protocol.parse_prepare(body)
        require_file(ref, "reference audio")
        actual = protocol.sha256_file(ref)
        if sha and sha != actual:
            raise invalid(f"reference audio {ref} does not match its SHA-256")
        path = self.store.path(cache_dir, actual) if cache_dir else ""
        if path:
            loaded = self.store.load(path, self.device, ("spk_cond", "style", "prompt_condition", "ref_mel"), actual)
            if loaded:
                self.current = {"sha": actual, "reference": ref, "tensors": loaded[0]}
                return {"cache_path": path, "computed": False, "seconds": time.perf_counter() - start}
        tensors = self._compute(ref, actual)
        if path:
            self.store.save(path, actual, tensors)
        self.current = {"sha": actual, "reference": ref, "tensors": tensors}
        return {"cache_path": path, "computed": True, "seconds": time.perf_counter() - start}

    def _conditioning(self, req):
        ref = req.reference_audio_path
        cur = self.current
        if cur and cur["reference"] == ref:
            return cur["tensors"]
        if req.conditioning_path:
            loaded = self.store.load(req.conditioning_path, self.device, ("spk_cond", "style", "prompt_condition",
                                                                          "ref_mel"))
            if loaded:
                self.current = {"sha": loaded[1], "reference": ref, "tensors": loaded[0]}
                return loaded[0]
        # A new speaker: drop the old slot first, as IndexTTS2 does (and empty the cache).
        self.current = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        sha = protocol.sha256_file(ref)
        self.current = {"sha": sha, "reference": ref, "tensors": self._compute(ref, sha)}
        return self.current["tensors"]

    # -- synthesis ---------------------------------------------------------------------

    def synthesize(self, req):
        require_file(req.reference_audio_path, "reference audio")
        if req.emotion.mode == "audio":
            require_file(req.emotion.audio_path, "emotion reference audio")
        if req.emotion.mode == "text":
            raise invalid("the benchmark host has no emotion-from-text model")
        stages = {k: 0.0 for k in ("conditioning", "gpt", "gpt_forward", "s2mel", "vocoder")}

        def timed(stage, fn, *args):
            t = time.perf_counter()
            out = fn(*args)
            if self.device.type == "cuda":
                torch.cuda.synchronize()
            stages[stage] += time.perf_counter() - t
            return out

        factor = req.duration_factor or 1.0
        plan = plan_segments(req, self.opts.tokens_per_second)
        d = self.dims
        tokens_total = 0
        pieces = []
        t0 = time.perf_counter()
        with torch.inference_mode():
            c = timed("conditioning", self._conditioning, req)
            for seg_text, n_tok, _ in plan:
                text_tokens = torch.randint(0, d.text_vocab, (1, seg_text), device=self.device)
                with self.gpt_context():
                    cond = self.gpt.conditioning(c["spk_cond"].to(self.gpt_dtype), c["emo_cond"].to(self.gpt_dtype))
                    codes = timed("gpt", self.gpt.generate, cond, text_tokens, n_tok, self.opts.beams,
                                  self.opts.decode_stride)
                    latent = timed("gpt_forward", self.gpt.latents, cond, text_tokens, codes)
                tokens_total += codes.shape[1]
                frames = int(codes.shape[1] * MEL_FRAMES_PER_TOKEN)

                def s2mel(latent=latent, codes=codes, frames=frames):
                    target = self.s2mel.condition(latent.float(), codes, frames)
                    full = torch.cat([c["prompt_condition"], target], dim=1)
                    mel = self.s2mel.inference(full, c["ref_mel"], c["style"], self.opts.diffusion_steps)
                    return mel[..., c["ref_mel"].shape[-1]:]

                mel = timed("s2mel", s2mel)
                wav = timed("vocoder", self.vocoder, mel)
                pieces.append((wav.squeeze() * 32767).to(torch.int16).cpu())
                del mel, wav, latent, codes, cond
        stages["infer"] = time.perf_counter() - t0
        silence = torch.zeros(int(SAMPLE_RATE * 0.2), dtype=torch.int16)
        joined = []
        for i, p in enumerate(pieces):
            if i:
                joined.append(silence)
            joined.append(p)
        audio = torch.cat(joined)
        out = req.output_path
        if os.path.dirname(out):
            os.makedirs(os.path.dirname(out), exist_ok=True)
        with wave.open(out, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes(audio.numpy().tobytes())
        return {"engine": "bench", "model_version": self.version, "output_path": out, "tokens": tokens_total,
                "stages": stages, "duration_factor": factor}



# ---------------------------------------------------------------------------------------
# The batching adapter (--batch): the benchmark model's parts for batching.Batcher


class _GPTLayer:
    """One GPT block split around its attention, for the batcher's paged KV cache."""

    def __init__(self, blk):
        self.b = blk

    def qkv(self, x):
        b, t, d = x.shape
        h = self.b.heads
        return self.b.attn(self.b.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)

    def finish(self, x, a):
        b, t, d = x.shape
        x = x + self.b.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.b.mlp(self.b.ln2(x))


class BenchAdapter:
    """The benchmark model behind the batching core: conditioning and text from
    BenchBackend, the GPT split into layers, batched latents, s2mel and vocoder."""

    engine = "bench"

    def __init__(self, opts, dims=None, speakers=16):
        self.opts = opts
        self.backend = BenchBackend(opts, dims)
        self.version = opts.model_version
        self.speakers = speakers  # conditioning kept for this many references at once
        self.cache = {}  # reference path -> tensors, in use order
        self.return_codes = bool(getattr(opts, "return_codes", False))
        self.diffusion_steps = opts.diffusion_steps

    def load(self):
        b = self.backend
        b.load()
        d = b.dims
        self.device = b.device
        self.sample_rate = SAMPLE_RATE
        self.layers, self.heads, self.head_dim = d.gpt_layers, d.gpt_heads, d.gpt_dim // d.gpt_heads
        self.kv_dtype = b.gpt_dtype
        self.vocab = d.mel_vocab
        self.stop_token = d.mel_vocab - 1
        self.prefix_tokens = d.cond_latents
        self.max_positions = d.max_positions
        self.tokens_per_second = self.opts.tokens_per_second
        self.layers_list = [_GPTLayer(blk) for blk in b.gpt.blocks]
        self.activation_bytes_per_second = self._probe_activations()
        if self.device.type == "cuda" and self.opts.vocoder_compile:
            self._warm_vocoder()
        graphs = self.opts.s2mel_graphs
        if graphs is None:  # measured on one H200: bf16 +8%, fp32 -14% (docs/benchmarks.md)
            graphs = self.opts.s2mel_dtype == "bf16"
        # s2mel's step, as a CUDA graph per bucket of rows and frames where graphs: a
        # step's 13 DiT layers and 8 WaveNet layers launch kernels by the dozen, 25 times
        # a line, and the s2mel thread's launches took time from the GPT's.
        self.s2mel_graphs = self.device.type == "cuda" and graphs

    def info(self):
        return {**self.backend.info(), "batching": True, "s2mel_graphs": self.s2mel_graphs}

    def vocoder_kernel(self):
        """The vocoder's activations ("fused" or "torch") and why not fused where asked."""
        return self.backend.vocoder_kernel, self.backend.vocoder_kernel_off

    def gpt_context(self):
        return self.backend.gpt_context()

    def default_kv_cache_bytes(self):
        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
            return int(free * AUTO_KV_CACHE_SHARE)
        return 64 << 20

    def check(self, req):
        require_file(req.reference_audio_path, "reference audio")
        if req.emotion.mode == "audio":
            require_file(req.emotion.audio_path, "emotion reference audio")
        if req.emotion.mode == "text":
            raise invalid("the benchmark host has no emotion-from-text model")

    # -- conditioning (on the GPT thread) --------------------------------------------

    def prepare(self, body):
        with batching.CAPTURE_LOCK:  # a new speaker empties the allocator's cache
            res = self.backend.prepare(body)
        cur = self.backend.current
        self._keep(cur["reference"], cur["tensors"])
        return res

    def _keep(self, ref, tensors):
        self.cache.pop(ref, None)
        self.cache[ref] = tensors
        while len(self.cache) > self.speakers:
            self.cache.pop(next(iter(self.cache)))

    def conditioning(self, req):
        ref = req.reference_audio_path
        c = self.cache.get(ref)
        if c is None:
            loaded = None
            if req.conditioning_path:
                loaded = self.backend.store.load(req.conditioning_path, self.device,
                                                 ("spk_cond", "style", "prompt_condition", "ref_mel"))
            c = loaded[0] if loaded else self.backend._compute(ref, protocol.sha256_file(ref))
        if "gpt_cond" not in c:  # the GPT's conditioning latents, once per reference
            with self.gpt_context():
                dt = self.backend.gpt_dtype
                c["gpt_cond"] = self.backend.gpt.conditioning(c["spk_cond"].to(dt), c["emo_cond"].to(dt))
        self._keep(ref, c)
        return c

    def segments(self, req):
        """The line's text as (text tokens [1, T], mel tokens to make, seconds) per
        segment, as BenchBackend.synthesize splits it; the tokens come from a generator
        seeded by the request, so a line gets the same tokens alone or in a batch."""
        d = self.backend.dims
        g = torch.Generator(device="cpu").manual_seed(req.seed * 1000003 + int(protocol.sha256_text(req.text)[:8], 16))
        return [(torch.randint(0, d.text_vocab, (1, n_text), generator=g).to(self.device), n_tok, secs)
                for n_text, n_tok, secs in plan_segments(req, self.opts.tokens_per_second)]

    # -- GPT pieces ------------------------------------------------------------------

    def embed_prefix(self, cond, text_tokens):
        return self.backend.gpt.prefix(cond["gpt_cond"], text_tokens)

    def embed_codes(self, tokens, positions):
        gpt = self.backend.gpt
        return gpt.mel_emb(tokens) + gpt.mel_pos(positions)

    def head(self, h):
        gpt = self.backend.gpt
        return gpt.head(gpt.ln_f(h))

    # -- the s2mel stage (its own thread and stream) ----------------------------------

    def latents_batch(self, items):
        """The GPT's second pass for several sequences at once: right-padded, causal, so
        every real position sees only real positions before it."""
        gpt = self.backend.gpt
        with self.gpt_context():
            xs = []
            for cond, text, codes in items:
                pos = torch.arange(codes.shape[1], device=codes.device)
                xs.append(torch.cat([gpt.prefix(cond["gpt_cond"], text), gpt.mel_emb(codes) + gpt.mel_pos(pos)],
                                    dim=1)[0])
            lens = [x.shape[0] for x in xs]
            x = torch.zeros(len(xs), max(lens), xs[0].shape[-1], dtype=xs[0].dtype, device=xs[0].device)
            for i, xi in enumerate(xs):
                x[i, :lens[i]] = xi
            h, _ = gpt.run(x)
        return [h[i:i + 1, lens[i] - codes.shape[1]:lens[i]] for i, (_, _, codes) in enumerate(items)]

    @staticmethod
    def s2mel_frames(cond, tokens):
        """The frames s2mel runs a sequence over: its reference's prompt and its target."""
        return cond["prompt_condition"].shape[1] + int(len(tokens) * MEL_FRAMES_PER_TOKEN)

    def s2mel_table(self):
        """A new batching.S2MelTable for s2mel (one per s2mel thread: each keeps its own rows and graphs)."""
        return FlowTable(self.backend.s2mel, self.opts.diffusion_steps, self.device, self.s2mel_graphs,
                         self.opts.s2mel_batch)

    def vocoder_batch(self, mels):
        frames = [m.shape[-1] for m in mels]
        x = torch.zeros(len(mels), mels[0].shape[1], max(frames), device=mels[0].device)
        for i, m in enumerate(mels):
            x[i, :, :frames[i]] = m[0]
        wav = self.backend.vocoder(x)
        return [wav[i:i + 1, :, :frames[i] * HOP] for i in range(len(mels))]

    def _warm_vocoder(self):
        """A compiled vocoder specialises a group of one line (the load's probe) apart
        from larger groups, and would compile again on the first of those it serves
        (tens of seconds on an H200, docs/benchmarks.md): a group of two, here, compiles the
        shape-generic version at load instead."""
        with torch.inference_mode():
            mel = torch.zeros(1, self.backend.dims.n_mels, 64, device=self.device)
            self.vocoder_batch([mel, mel])
        torch.cuda.synchronize()

    def _probe_activations(self):
        """Activation bytes per audio second of one line through s2mel and the vocoder,
        measured once at load on a 4 s line (0 without CUDA: the worker's default)."""
        if self.device.type != "cuda":
            return 0
        d, s2 = self.backend.dims, self.backend.s2mel
        secs = 4.0
        tokens = int(secs * self.tokens_per_second)
        frames = int(tokens * MEL_FRAMES_PER_TOKEN)
        prompt_frames = int(8 * SAMPLE_RATE / HOP)
        with torch.inference_mode():
            cond = (torch.randn(1, prompt_frames + frames, d.dit_dim, device=self.device),
                    torch.randn(1, d.n_mels, prompt_frames, device=self.device),
                    torch.randn(1, d.style_dim, device=self.device), 0)
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            mel = s2.inference_batch([cond], self.opts.diffusion_steps)
            self.vocoder_batch(mel)  # as groups are served: a compiled vocoder sees their layout
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            del mel, cond
        torch.cuda.empty_cache()
        return int(peak / secs)

# ---------------------------------------------------------------------------------------
# Command line


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-version", default=env("BENCH_MODEL_VERSION", "IndexTTS-2-bench@1"))
    p.add_argument("--device", default=env("BENCH_DEVICE"), help="cuda, cuda:0 or cpu (default: cuda if present)")
    p.add_argument("--gpt-dtype", default=env("BENCH_GPT_DTYPE", "fp16"), choices=("fp16", "bf16", "fp32"))
    p.add_argument("--beams", type=int, default=int(env("BENCH_BEAMS", "3")),
                   help="beams per sequence (3 as IndexTTS); with --batch, 1 samples (--top-k, --top-p, --temperature)")
    p.add_argument("--tokens-per-second", type=float, default=float(env("BENCH_TOKENS_PER_SECOND", "50")),
                   help="mel tokens per second of audio (IndexTTS-2: 50, 2.5: 25)")
    p.add_argument("--diffusion-steps", type=int, default=int(env("BENCH_DIFFUSION_STEPS", "25")))
    p.add_argument("--decode-stride", type=int, default=int(env("BENCH_DECODE_STRIDE", "1")),
                   help="mel tokens per GPT step: the same memory in fewer steps (1: as IndexTTS-2)")
    p.add_argument("--weight-seed", type=int, default=0)
    p.add_argument("--share-weights", default=env("BENCH_SHARE_WEIGHTS", ""), metavar="PATH",
                   help="Unix socket through which the hosts of one GPU share one copy of the weights (CUDA IPC)")
    p.add_argument("--weights-role", default="auto", choices=("auto", "lend", "borrow"),
                   help="with --share-weights: load and lend the weights, map the lender's, or lend if no host does")
    p.add_argument("--batch", action="store_true", default=env_bool("BENCH_BATCH", False),
                   help="one batching host for the GPU (protocol 2): many lines decode in one batch")
    p.add_argument("--max-sequences", type=int, default=int(env("BENCH_MAX_SEQUENCES", "32")),
                   help="with --batch: the most lines decoding at once")
    p.add_argument("--kv-cache-bytes", type=int, default=int(env("BENCH_KV_CACHE_BYTES", "0")),
                   help="with --batch: the paged KV cache's size (0: 40%% of the memory free after load)")
    p.add_argument("--s2mel-batch", type=int, default=int(env("BENCH_S2MEL_BATCH", "16")),
                   help="with --batch: the most lines in one s2mel and vocoder batch")
    p.add_argument("--s2mel-max-wait", type=float, default=float(env("BENCH_S2MEL_MAX_WAIT", str(batching.S2MEL_MAX_WAIT))),
                   help="with --batch: s2mel takes the shortest waiting line first; one that has waited this many "
                        "seconds goes first whatever its length")
    batching.add_decode_args(p, "BENCH")
    p.add_argument("--s2mel-graphs", dest="s2mel_graphs", action="store_const", const=True,
                   default=env_bool("BENCH_S2MEL_GRAPHS", None),
                   help="with --batch on CUDA: replay s2mel's flow-matching step as a CUDA graph per bucket of lines "
                        "and frames, captured on first use (docs/engines.md); by default on with --s2mel-dtype bf16, "
                        "off with fp32, where the buckets' padding costs more than the launches it saves")
    p.add_argument("--no-s2mel-graphs", dest="s2mel_graphs", action="store_const", const=False,
                   help="s2mel kernel by kernel, whatever its precision")
    p.add_argument("--s2mel-compile", action="store_true", default=env_bool("BENCH_S2MEL_COMPILE", False),
                   help="compile s2mel's flow-matching estimator with torch.compile (IndexTTS2's use_torch_compile): "
                        "fused kernels, after a compile on first use")
    p.add_argument("--vocoder-compile", action="store_true", default=env_bool("BENCH_VOCODER_COMPILE", False),
                   help="compile the vocoder with torch.compile: its anti-aliased activations in fused kernels, as "
                        "BigVGAN's own CUDA kernel (IndexTTS2's use_cuda_kernel) fuses them")
    p.add_argument("--vocoder-fused", action="store_true", default=env_bool("BENCH_VOCODER_FUSED", False),
                   help="on CUDA with Triton: each of the vocoder's anti-aliased activations as one kernel "
                        "(alias_free.py), as BigVGAN's own CUDA kernel; checked at load, the four steps where "
                        "the check fails")
    p.add_argument("--s2mel-dtype", default=env("BENCH_S2MEL_DTYPE", "fp32"), choices=("fp32", "bf16"),
                   help="s2mel's DiT in bf16, its Euler updates in fp32 (fp32: as IndexTTS-2)")
    p.add_argument("--tf32", action="store_true", default=env_bool("BENCH_TF32", False),
                   help="fp32 matrix products on TF32 tensor cores (s2mel, the encoders); off as in IndexTTS-2")
    p.add_argument("--return-codes", action="store_true", help=argparse.SUPPRESS)  # tests: the mel codes
    p.add_argument("--selftest", action="store_true", help="run prepare and two syntheses without HTTP, then exit")
    p.add_argument("--full", action="store_true", help="with --selftest: real dimensions instead of tiny ones")
    protocol.add_listen_args(p)
    return p.parse_args(argv)


def selftest(opts):
    """Loads the model and runs the protocol's prepare and synthesize in-process,
    printing one JSON line per request; exit status 0 when everything answered 200."""
    import tempfile

    if torch is None:
        print("bench_host: --selftest needs PyTorch, which is not installed", file=sys.stderr)
        return 2
    backend = BenchBackend(opts, None if opts.full else Dims.tiny())
    host = protocol.ModelHost(backend)
    t = time.perf_counter()
    host.load()
    print(json.dumps({"loaded_seconds": round(time.perf_counter() - t, 2), "parameters": backend.params,
                      "resident_bytes": host.resident, "device": str(backend.device)}), flush=True)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, "ref.wav")
        with wave.open(ref, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(b"\0\0" * 16000 * 8)
        sha = protocol.sha256_file(ref)
        calls = [("/prepare", {"reference_audio_path": ref, "reference_sha256": sha, "cache_dir": tmp}),
                 ("/prepare", {"reference_audio_path": ref, "reference_sha256": sha, "cache_dir": tmp})]
        for secs in ((1, 2) if not opts.full else (2, 2, 12, 30)):
            calls.append(("/synthesize", {"text": "benchmark line", "target_seconds": secs,
                                          "speaker": {"reference_audio_path": ref},
                                          "output_path": os.path.join(tmp, f"out{secs}.wav")}))
        for path, body in calls:
            status, res = host.handle("POST", path, body)
            ok = ok and status == 200
            print(json.dumps({"path": path, "status": status, **res}, default=str), flush=True)
        print(json.dumps({"release_cache": host.handle("POST", "/release_cache", {})[1]}), flush=True)
    return 0 if ok else 1


def main(argv=None):
    opts = parse_args(argv)
    if opts.selftest:
        return selftest(opts)
    if torch is None:
        print("bench_host: PyTorch is not installed", file=sys.stderr)
        return 2
    if opts.batch:
        if opts.share_weights:
            print("bench_host: --batch holds the one copy of the weights; --share-weights is for separate hosts",
                  file=sys.stderr)
            return 2
        return protocol.run_host(None, opts, host=batching_host(opts))
    return protocol.run_host(BenchBackend(opts), opts)


def batching_host(opts, dims=None):
    """The protocol-2 host for opts (--batch and its settings)."""
    if (opts.max_sequences < 1 or opts.beams < 1 or opts.kv_cache_bytes < 0 or opts.s2mel_batch < 1
            or not opts.s2mel_max_wait >= 0):
        raise SystemExit("bench_host: --max-sequences, --beams and --s2mel-batch must be at least 1, "
                         "--kv-cache-bytes and --s2mel-max-wait not negative")
    return batching.BatchingHost(BenchAdapter(opts, dims), {
        "max_sequences": opts.max_sequences, "beams": opts.beams, "kv_cache_bytes": opts.kv_cache_bytes,
        "decode_stride": opts.decode_stride, "s2mel_batch": opts.s2mel_batch, "s2mel_max_wait": opts.s2mel_max_wait,
        **batching.decode_settings(opts, "bench_host")})


if __name__ == "__main__":
    sys.exit(main())
