"""Stand-ins for IndexTTS2's own modules, with real PyTorch (tests of the batching
adapter only; the one-request stand-in in _standin.py runs on the torch shim instead).

Each class has the attribute paths, call signatures and tensor shapes of the module it
stands for (upstream file in brackets), at tiny widths, with weights drawn from a seeded
generator (INDEXTTS_STANDIN_SEED, default 0), so the same seed gives the same model:

    UnifiedVoice   [indextts/gpt/model_v2.py; 2.5: spk_cond_mode="campplus"] .gpt is a GPT-2 model (HF GPT2Model's .h[i]
                   with ln_1, attn.c_attn / attn.c_proj as Conv1D, ln_2, mlp; .ln_f);
                   get_conditioning, get_emovec, merge_emovec, speed_emb, spk_emb_proj and
                   lang_embedding (2.5), text/mel embeddings and LearnedPositionEmbeddings,
                   final_norm, mel_head, inference_speech (greedy: a full forward per
                   token, no cache, the reference the adapter's paged decode must match),
                   forward (the latents for s2mel)
    semantic model [transformers Wav2Vec2BertModel] and its feature extractor
                   [SeamlessM4TFeatureExtractor]: 160-d features at 50 a second -> 1024-d
                   hidden states (1024-d in the real model; semantic_dim here), 18 of them (IndexTTS2 reads the 17th)
    semantic codec [indextts/codec: RepCodec] quantize(x) -> (codes, emb), quantizer.vq2emb
    s2mel          [indextts/s2mel/modules/commons.MyModel] .models["gpt_layer" |
                   "length_regulator" | "cfm"]; cfm.estimator(x, prompt_x, x_lens, t, style,
                   cond) masks frames past x_lens, as the DiT does
    CAMPPlus       [indextts/s2mel/modules/campplus/DTDNN.py] fbank [1, T, 80] -> [1, 192]
    BigVGAN        [indextts/s2mel/modules/bigvgan] mel [B, 80, F] -> [B, 1, 256 F]
    TextTokenizer  [indextts/utils/front.py] tokenize, split_segments, convert_tokens_to_ids
    2.5's text     [indextts/infer_v2_5.py, utils/tokenizer.py] tokenizer.encode (tiktoken),
                   text_process, ja_text_process, split_text_by_tokens, lang_to_token,
                   nemo_text_normalize, apply_pronunciation_annotations

INDEXTTS_STANDIN_DIMS (JSON) overrides the widths in DIMS.
"""

import json
import math
import os
import re
import types
import zlib

import torch
import torch.nn.functional as F
from torch import nn

DIMS = {"model_dim": 32, "layers": 2, "heads": 4, "condition_num_latent": 4, "semantic_dim": 64,
        "semantic_in": 160, "content_dim": 64, "dit_dim": 32, "dit_heads": 4, "dit_layers": 2, "voc_channels": 16,
        "codebook": 64}
N_MELS = 80
STYLE_DIM = 192
HOP = 256
SAMPLE_RATE = 22050


def dims():
    d = dict(DIMS)
    d.update(json.loads(os.environ.get("INDEXTTS_STANDIN_DIMS") or "{}"))
    return d


def seeded_init(module, seed):
    """Every parameter from one generator in name order: the same seed, the same model."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("bias"):
                p.zero_()
            elif isinstance(p, nn.Parameter) and (".ln" in name or "norm" in name) and p.dim() == 1:
                p.fill_(1.0)
            else:  # about unit-variance activations through every layer
                fan_in = p[0].numel() if p.dim() > 1 else p.shape[0]
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))


def causal_attention(q, k, v, mask=None):
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    t, s = q.shape[-2], k.shape[-2]
    causal = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
    if mask is not None:
        causal = causal & mask
    return torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v


# ---------------------------------------------------------------------------------------
# GPT-2 (transformers' GPT2Model layout)


class Conv1D(nn.Module):
    """transformers' Conv1D: a linear layer with its weight stored [in, out]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        return x @ self.weight + self.bias


class GPT2Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim = dim, heads, dim // heads
        self.c_attn = Conv1D(3 * dim, dim)
        self.c_proj = Conv1D(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (y.view(b, t, self.num_heads, self.head_dim).transpose(1, 2) for y in self.c_attn(x).split(d, dim=2))
        return self.c_proj(causal_attention(q, k, v).transpose(1, 2).reshape(b, t, d))


class GPT2MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.c_fc = Conv1D(4 * dim, dim)
        self.c_proj = Conv1D(dim, 4 * dim)

    def act(self, x):  # gelu_new
        return F.gelu(x, approximate="tanh")

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = GPT2Attention(dim, heads)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = GPT2MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    """wpe and wte removed, as build_hf_gpt_transformer does: inputs_embeds only."""

    def __init__(self, dim, layers, heads):
        super().__init__()
        self.h = nn.ModuleList(GPT2Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, inputs_embeds=None, return_dict=True, **_kwargs):
        x = inputs_embeds
        for blk in self.h:
            x = blk(x)
        return types.SimpleNamespace(last_hidden_state=self.ln_f(x))


class LearnedPositionEmbeddings(nn.Module):
    def __init__(self, seq_len, model_dim):
        super().__init__()
        self.emb = nn.Embedding(seq_len, model_dim)

    def forward(self, x):
        return self.emb(torch.arange(0, x.shape[1], device=x.device))

    def get_fixed_embedding(self, ind, dev):
        return self.emb(torch.tensor([ind], device=dev)).unsqueeze(0)


class Perceiver(nn.Module):
    """PerceiverResampler: learned latents cross-attend to a masked context."""

    def __init__(self, dim, dim_context, num_latents):
        super().__init__()
        self.latents = nn.Parameter(torch.empty(num_latents, dim))
        self.kv = nn.Linear(dim_context, 2 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        k, v = self.kv(x).chunk(2, dim=-1)
        scores = self.latents[None] @ k.transpose(1, 2) / math.sqrt(k.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, -x.shape[1]:].bool(), float("-inf"))
        return self.out(torch.softmax(scores, dim=-1) @ v)


class ConformerEncoder(nn.Module):
    """Takes (x [b, s, 1024], lengths) and returns (x [b, s, d], mask [b, 1, s])."""

    def __init__(self, input_size, output_size):
        super().__init__()
        self.inp = nn.Linear(input_size, output_size)
        self.ff = nn.Linear(output_size, output_size)
        self.norm = nn.LayerNorm(output_size)

    def forward(self, x, lengths):
        h = self.inp(x)
        h = self.norm(h + torch.tanh(self.ff(h)))
        mask = torch.arange(x.shape[1], device=x.device)[None] < lengths.to(x.device)[:, None]
        return h, mask[:, None]


class UnifiedVoice(nn.Module):
    def __init__(self, model_dim, layers, heads, max_text_tokens, max_mel_tokens, number_text_tokens,
                 number_mel_codes, start_mel_token, stop_mel_token, start_text_token, stop_text_token,
                 condition_num_latent, semantic_dim, spk_cond_mode="conformer", languages=8):
        super().__init__()
        self.model_dim, self.layers, self.heads = model_dim, layers, heads
        self.max_text_tokens, self.max_mel_tokens = max_text_tokens, max_mel_tokens
        self.number_text_tokens, self.number_mel_codes = number_text_tokens, number_mel_codes
        self.start_mel_token, self.stop_mel_token = start_mel_token, stop_mel_token
        self.start_text_token, self.stop_text_token = start_text_token, stop_text_token
        self.cond_num = condition_num_latent
        self.spk_cond_mode = spk_cond_mode
        self.condition_type = "conformer_perceiver"
        if spk_cond_mode == "campplus":
            self.spk_emb_proj = nn.Linear(STYLE_DIM, model_dim)
            self.lang_embedding = nn.Embedding(languages + 1, model_dim)
        else:
            self.conditioning_encoder = ConformerEncoder(semantic_dim, model_dim)
            self.perceiver_encoder = Perceiver(model_dim, model_dim, condition_num_latent)
        self.speed_emb = nn.Embedding(2, model_dim)
        self.emo_conditioning_encoder = ConformerEncoder(semantic_dim, model_dim)
        self.emo_perceiver_encoder = Perceiver(semantic_dim, model_dim, 1)
        self.text_embedding = nn.Embedding(number_text_tokens + 1, model_dim)
        self.emo_layer = nn.Linear(model_dim, model_dim)
        self.emovec_layer = nn.Linear(semantic_dim, model_dim)
        self.mel_embedding = nn.Embedding(number_mel_codes, model_dim)
        self.gpt = GPT2Model(model_dim, layers, heads)
        self.mel_pos_embedding = LearnedPositionEmbeddings(max_mel_tokens + 2 + 1, model_dim)
        self.text_pos_embedding = LearnedPositionEmbeddings(max_text_tokens + 2, model_dim)
        self.final_norm = nn.LayerNorm(model_dim)
        self.mel_head = nn.Linear(model_dim, number_mel_codes)

    def get_conditioning(self, speech_conditioning_input, cond_mel_lengths=None):
        x, mask = self.conditioning_encoder(speech_conditioning_input.transpose(1, 2), cond_mel_lengths)
        return self.perceiver_encoder(x, mask.squeeze(1))  # (b, 32, d)

    def get_emo_conditioning(self, speech_conditioning_input, cond_mel_lengths=None):
        x, mask = self.emo_conditioning_encoder(speech_conditioning_input.transpose(1, 2), cond_mel_lengths)
        return self.emo_perceiver_encoder(x, mask.squeeze(1)).squeeze(1)  # (b, 1024)

    def get_emovec(self, emo_speech_conditioning_latent, emo_cond_lengths):
        return self.emo_layer(self.emovec_layer(self.get_emo_conditioning(emo_speech_conditioning_latent.transpose(1, 2),
                                                                          emo_cond_lengths)))

    def merge_emovec(self, speech_conditioning_latent, emo_speech_conditioning_latent, cond_lengths, emo_cond_lengths,
                     alpha=1.0):
        emo_vec = self.get_emovec(emo_speech_conditioning_latent, emo_cond_lengths)
        base_vec = self.get_emovec(speech_conditioning_latent, cond_lengths)
        return base_vec + alpha * (emo_vec - base_vec)

    def _conds(self, speech_conditioning_latent, emo_vec):
        b = speech_conditioning_latent.shape[0]
        if self.spk_cond_mode == "campplus":
            zeros = torch.zeros(b, 2, self.model_dim, device=emo_vec.device, dtype=speech_conditioning_latent.dtype)
            return torch.cat((speech_conditioning_latent + emo_vec.unsqueeze(1), zeros), 1)
        speed = torch.zeros(b, dtype=torch.long, device=emo_vec.device)
        return torch.cat((speech_conditioning_latent + emo_vec.unsqueeze(1), self.speed_emb(speed + 1).unsqueeze(1),
                          self.speed_emb(speed).unsqueeze(1)), 1)

    def _text_emb(self, text_inputs, langs=None):
        t = F.pad(F.pad(text_inputs, (1, 0), value=self.start_text_token), (0, 1), value=self.stop_text_token).long()
        e = self.text_embedding(t) + self.text_pos_embedding(t)
        if langs is not None and self.spk_cond_mode == "campplus":
            e = e + self.lang_embedding(langs.long()).view(-1, 1, self.model_dim)
        return e

    def inference_speech(self, speech_condition, text_inputs, langs=None, emo_speech_condition=None,
                         cond_lengths=None, emo_cond_lengths=None, emo_vec=None, use_speed=False,
                         campplus_embedding=None, max_generate_length=None, **hf_generate_kwargs):
        """Greedy decoding only (do_sample=False, num_beams=1), a full forward per token:
        the plain reference the batching adapter's paged decode is tested against."""
        if hf_generate_kwargs.get("do_sample", True) or hf_generate_kwargs.get("num_beams", 1) != 1:
            raise NotImplementedError("the stand-in UnifiedVoice decodes greedily only (do_sample=False, num_beams=1)")
        penalty = hf_generate_kwargs.get("repetition_penalty", 1.0)
        if self.spk_cond_mode == "campplus":
            latent = self.spk_emb_proj(campplus_embedding).unsqueeze(1)
        else:
            latent = self.get_conditioning(speech_condition.transpose(1, 2), cond_lengths)
        if emo_vec is None:
            emo_vec = self.get_emovec(emo_speech_condition, emo_cond_lengths)
        prefix = torch.cat([self._conds(latent, emo_vec), self._text_emb(text_inputs, langs)], dim=1)
        codes = [self.start_mel_token]
        limit = max_generate_length or self.max_mel_tokens
        while len(codes) - 1 < limit:
            mel = torch.tensor([codes], device=prefix.device)
            x = torch.cat([prefix, self.mel_embedding(mel) + self.mel_pos_embedding(mel)], dim=1)
            h = self.gpt(inputs_embeds=x).last_hidden_state
            logits = self.mel_head(self.final_norm(h[:, -1])).float()[0]
            seen = torch.tensor(sorted(set(codes[1:])), dtype=torch.long, device=logits.device)
            if len(seen):
                prev = logits[seen]
                logits[seen] = torch.where(prev < 0, prev * penalty, prev / penalty)
            tok = int(logits.argmax())
            codes.append(tok)
            if tok == self.stop_mel_token:
                break
        return torch.tensor([codes[1:]], device=prefix.device), latent

    def forward(self, speech_conditioning_latent, text_inputs, text_lengths, mel_codes, mel_codes_lengths,
                emo_speech_conditioning_latent, cond_mel_lengths=None, emo_cond_mel_lengths=None, emo_vec=None,
                use_speed=None, do_spk_cond=False, langs=None):
        """The latents for s2mel: final_norm of the hidden states at [start, codes[:-1]]."""
        if emo_vec is None:
            emo_vec = self.get_emovec(emo_speech_conditioning_latent, emo_cond_mel_lengths)
        mel = F.pad(mel_codes.long(), (1, 0), value=self.start_mel_token)
        mel = F.pad(mel, (0, 1), value=self.stop_mel_token)
        conds = self._conds(speech_conditioning_latent, emo_vec)
        x = torch.cat([conds, self._text_emb(text_inputs, langs), self.mel_embedding(mel) + self.mel_pos_embedding(mel)],
                      dim=1)
        enc = self.final_norm(self.gpt(inputs_embeds=x).last_hidden_state)
        return enc[:, -mel.shape[1]:][:, :-2]


# ---------------------------------------------------------------------------------------
# Semantic model, codec, s2mel, CAMPPlus, BigVGAN


class SeamlessM4TFeatureExtractor:
    """16 kHz audio -> 160-d features at 50 frames a second (80 fbank bins, stacked twice)."""

    def __init__(self, semantic_in):
        self.proj = torch.randn(320, semantic_in, generator=torch.Generator().manual_seed(11)) / 20

    def __call__(self, audio, sampling_rate=16000, return_tensors="pt"):
        x = torch.as_tensor(audio, dtype=torch.float32).reshape(-1)
        n = max(1, x.shape[0] // 320)
        x = F.pad(x, (0, n * 320 - x.shape[0]))[:n * 320].view(1, n, 320)
        return {"input_features": x @ self.proj, "attention_mask": torch.ones(1, n, dtype=torch.long)}


class Wav2Vec2BertModel(nn.Module):
    def __init__(self, semantic_in, semantic_dim, n_layers=18):
        super().__init__()
        self.inp = nn.Linear(semantic_in, semantic_dim)
        self.layers = nn.ModuleList(nn.Linear(semantic_dim, semantic_dim) for _ in range(n_layers - 1))

    def forward(self, input_features=None, attention_mask=None, output_hidden_states=True):
        x = torch.tanh(self.inp(input_features))
        hidden = [x]
        for layer in self.layers:
            x = torch.tanh(layer(x)) * 0.5 + x * 0.5
            hidden.append(x)
        return types.SimpleNamespace(hidden_states=tuple(hidden), last_hidden_state=x)


class _Quantizer(nn.Module):
    def __init__(self, codebook, dim):
        super().__init__()
        self.codebook = nn.Embedding(codebook, dim)

    def vq2emb(self, vq):
        """codes [B, 1, T] -> embeddings [B, D, T]."""
        return self.codebook(vq[:, 0].long().clamp(0, self.codebook.num_embeddings - 1)).transpose(1, 2)


class RepCodec(nn.Module):
    def __init__(self, codebook, dim):
        super().__init__()
        self.quantizer = _Quantizer(codebook, dim)

    def quantize(self, x):
        """x [B, T, D] -> (codes [B, T], embeddings [B, T, D]) (nearest codebook entries)."""
        w = self.quantizer.codebook.weight
        codes = ((x[..., None, :] - w) ** 2).sum(-1).argmin(-1)
        return codes, self.quantizer.codebook(codes)


class LengthRegulator(nn.Module):
    """forward(x [B, T, 1024], ylens [B], n_quantizers, f0) -> (x [B, max ylens, C], ...):
    continuous content projected, interpolated to ylens frames (nearest), masked."""

    def __init__(self, in_dim, channels):
        super().__init__()
        self.content_in_proj = nn.Linear(in_dim, channels)
        self.model = nn.Conv1d(channels, channels, 3, padding=1)

    def forward(self, x, ylens=None, n_quantizers=None, f0=None):
        x = self.content_in_proj(x)
        x = F.interpolate(x.transpose(1, 2).contiguous(), size=int(ylens.max()), mode="nearest")
        mask = (torch.arange(x.shape[-1], device=x.device)[None] < ylens[:, None]).unsqueeze(1)
        out = (self.model(x) + x) * mask
        return out.transpose(1, 2), ylens, None, None, None


class DiT(nn.Module):
    """forward(x, prompt_x, x_lens, t, style, cond): [B, 80, T] velocities; frames at or
    past x_lens are masked out of every real frame's attention and read as zeros by the
    final convolution."""

    def __init__(self, content_dim, dim, heads, layers):
        super().__init__()
        self.heads = heads
        self.cond_projection = nn.Linear(content_dim, content_dim)
        self.cond_x_merge_linear = nn.Linear(2 * N_MELS + content_dim + STYLE_DIM, dim)
        self.t_embedder = nn.Linear(16, dim)
        self.qkv = nn.ModuleList(nn.Linear(dim, 3 * dim) for _ in range(layers))
        self.proj = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.conv1 = nn.Conv1d(dim, dim, 3, padding=1)
        self.final = nn.Linear(dim, N_MELS)

    def forward(self, x, prompt_x, x_lens, t, style, cond, mask_content=False):
        b, _, T = x.shape
        freqs = torch.arange(8, device=x.device, dtype=torch.float32)
        tt = t.float().reshape(-1, 1) * 1000 / (10 ** (freqs / 8))
        t1 = self.t_embedder(torch.cat([torch.sin(tt), torch.cos(tt)], dim=-1))  # [B, D]
        h = torch.cat([x.transpose(1, 2), prompt_x.transpose(1, 2), self.cond_projection(cond),
                       style[:, None, :].expand(b, T, STYLE_DIM)], dim=-1)
        h = self.cond_x_merge_linear(h) + t1[:, None]
        mask = torch.arange(T, device=x.device)[None] < x_lens.to(x.device)[:, None]  # [B, T]
        d = h.shape[-1]
        for qkv, proj in zip(self.qkv, self.proj):
            q, k, v = qkv(h).view(b, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            a = torch.softmax(scores.masked_fill(~mask[:, None, None, :], float("-inf")), dim=-1) @ v
            h = h + proj(a.transpose(1, 2).reshape(b, T, d))
        w = (h * mask[..., None]).transpose(1, 2)
        w = torch.tanh(self.conv1(w)) + w
        return self.final(w.transpose(1, 2)).transpose(1, 2)


class CFM(nn.Module):
    def __init__(self, content_dim, dim, heads, layers):
        super().__init__()
        self.in_channels = N_MELS
        self.sigma_min = 1e-6
        self.zero_prompt_speech_token = False
        self.estimator = DiT(content_dim, dim, heads, layers)

    @torch.inference_mode()
    def inference(self, mu, x_lens, prompt, style, f0, n_timesteps, temperature=1.0, inference_cfg_rate=0.5):
        z = torch.randn([mu.size(0), self.in_channels, mu.size(1)], device=mu.device) * temperature
        t_span = torch.linspace(0, 1, n_timesteps + 1, device=mu.device)
        return self.solve_euler(z, x_lens, prompt, mu, style, f0, t_span, inference_cfg_rate)

    def solve_euler(self, x, x_lens, prompt, mu, style, f0, t_span, inference_cfg_rate=0.5):
        t = t_span[0]
        prompt_len = prompt.size(-1)
        prompt_x = torch.zeros_like(x)
        prompt_x[..., :prompt_len] = prompt[..., :prompt_len]
        x[..., :prompt_len] = 0
        for step in range(1, len(t_span)):
            dt = t_span[step] - t_span[step - 1]
            v = self.estimator(torch.cat([x, x]), torch.cat([prompt_x, torch.zeros_like(prompt_x)]),
                               torch.cat([x_lens, x_lens]), torch.stack([t, t]),
                               torch.cat([style, torch.zeros_like(style)]), torch.cat([mu, torch.zeros_like(mu)]))
            v_cond, v_uncond = v.chunk(2)
            x = x + dt * ((1.0 + inference_cfg_rate) * v_cond - inference_cfg_rate * v_uncond)
            t = t + dt
            x[:, :, :prompt_len] = 0
        return x


class MyModel(nn.Module):
    def __init__(self, model_dim, semantic_dim, content_dim, dit_dim, dit_heads, dit_layers):
        super().__init__()
        self.models = nn.ModuleDict({
            "cfm": CFM(content_dim, dit_dim, dit_heads, dit_layers),
            "length_regulator": LengthRegulator(semantic_dim, content_dim),
            "gpt_layer": nn.Sequential(nn.Linear(model_dim, 256), nn.Linear(256, 128), nn.Linear(128, semantic_dim)),
        })


class CAMPPlus(nn.Module):
    def __init__(self, feat_dim=80, embedding_size=192):
        super().__init__()
        self.net = nn.Conv1d(feat_dim, 32, 3, padding=1)
        self.out = nn.Linear(64, embedding_size)

    def forward(self, x):
        h = torch.relu(self.net(x.transpose(1, 2)))
        return self.out(torch.cat([h.mean(-1), h.std(-1, unbiased=False)], dim=-1))


class BigVGAN(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.h = types.SimpleNamespace(sampling_rate=SAMPLE_RATE, hop_size=HOP, num_mels=N_MELS)
        self.conv_pre = nn.Conv1d(N_MELS, channels, 7, padding=3)
        self.ups = nn.ModuleList(nn.ConvTranspose1d(channels, channels, 16, stride=16) for _ in range(2))
        self.conv_post = nn.Conv1d(channels, 1, 7, padding=3)

    def forward(self, x):
        x = self.conv_pre(x)
        for up in self.ups:
            x = x + torch.sin(x)
            x = up(x)
        return torch.tanh(self.conv_post(x))

    def remove_weight_norm(self):
        pass


# ---------------------------------------------------------------------------------------
# Text


class TextNormalizer:
    def normalize(self, text, language=None):
        return re.sub(r"\s+", " ", text).strip()


class TextTokenizer:
    """One token per CJK character or punctuation mark, one per Latin word (lower-cased);
    ids from a hash of the token, so a vocabulary file is not needed."""

    unk_token_id = 2

    def __init__(self, vocab_size, normalizer):
        self.vocab_size = vocab_size
        self.normalizer = normalizer

    def tokenize(self, text):
        text = self.normalizer.normalize(text)
        return re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]|[A-Za-z0-9']+|[^\sA-Za-z0-9']", text)

    def convert_tokens_to_ids(self, tokens):
        return [3 + zlib.crc32(t.lower().encode("utf-8")) % (self.vocab_size - 3) for t in tokens]

    def split_segments(self, tokens, max_text_tokens_per_segment=120, quick_streaming_tokens=0):
        """At sentence ends; a sentence longer than the limit is cut at the limit."""
        segments, cur = [], []
        for t in tokens:
            cur.append(t)
            if t in (".", "!", "?", "。", "！", "？") or len(cur) >= max_text_tokens_per_segment:
                segments.append(cur)
                cur = []
        if cur:
            segments.append(cur)
        merged = []
        for s in segments:
            if merged and len(merged[-1]) + len(s) <= max_text_tokens_per_segment:
                merged[-1] = merged[-1] + s
            else:
                merged.append(s)
        return merged


class Tiktoken:
    """2.5's tokenizer (get_tokenizer: a tiktoken encoding): encode(text,
    allowed_special="all"), a special token such as <|en|> one id."""

    def __init__(self, vocab_size):
        self.vocab_size = vocab_size

    def encode(self, text, allowed_special="all"):
        out = []
        for special, word in re.findall(r"(<\|[^|]+\|>)|([\u3040-\u30ff\u4e00-\u9fff]|[A-Za-z0-9']+|[^\sA-Za-z0-9'])",
                                        text):
            tok = special or word
            out.append(3 + zlib.crc32(tok.encode("utf-8")) % (self.vocab_size - 3))
        return out


class TextProcess:
    """2.5's text_process (TextNormalizer): clean_pattern, char_rep_map, normalize."""

    clean_pattern = re.compile("[\u201c\u201d]")
    char_rep_map = {"\u201c": '"', "\u201d": '"'}

    def normalize(self, text):
        return re.sub(r"\s+", " ", text).strip()


class JapaneseG2PProcessor:
    def process_ja_text(self, text):
        return text


LANGUAGES = ("zh", "en", "ja", "es", "zhen", "common")


def lang_to_token(lang):
    lang = lang.lower()
    return LANGUAGES.index(lang if lang in LANGUAGES else "common")


def nemo_text_normalize(text, lang):
    return re.sub(r"\s+", " ", text).strip()


def apply_pronunciation_annotations(text):
    return text


def split_text_by_tokens(tts, text, max_tokens, lang_prefix=""):
    """2.5's IndexTTS2.split_text_by_tokens: sentences packed under the token budget."""
    capacity = tts.gpt.text_pos_embedding.emb.num_embeddings
    budget = max(1, min(max_tokens, capacity - 2) - len(tts.tokenizer.encode(lang_prefix)))
    chunks, cur = [], ""
    for part in re.split(r"(?<=[，。！？、；：,.!?;:\n])", text):
        if not part:
            continue
        if cur and len(tts.tokenizer.encode(cur + part)) > budget:
            chunks.append(cur)
            cur = part
        else:
            cur += part
    if cur:
        chunks.append(cur)
    return [c for c in chunks if c.strip()] or [text]


# ---------------------------------------------------------------------------------------
# Building an IndexTTS2 instance's modules


def _config_list(text, key):
    m = re.search(r"^" + key + r":\s*\[([^\]]*)\]", text, re.M)
    return [int(x) for x in m.group(1).split(",")] if m else [3, 17, 2, 8, 4, 5, 10, 24]


def build(tts, cfg_text, variant):
    """Sets the attributes IndexTTS2.__init__ sets, on the stand-in instance tts."""
    from indextts._standin import _config_int

    d = dims()
    seed = int(os.environ.get("INDEXTTS_STANDIN_SEED") or 0)
    dev = torch.device(tts.device)
    tts.gpt = UnifiedVoice(
        model_dim=d["model_dim"], layers=d["layers"], heads=d["heads"],
        max_text_tokens=_config_int(cfg_text, "max_text_tokens", 600),
        max_mel_tokens=_config_int(cfg_text, "max_mel_tokens", 1815),
        number_text_tokens=_config_int(cfg_text, "number_text_tokens", 12000),
        number_mel_codes=_config_int(cfg_text, "number_mel_codes", 8194),
        start_mel_token=_config_int(cfg_text, "start_mel_token", 8192),
        stop_mel_token=_config_int(cfg_text, "stop_mel_token", 8193),
        start_text_token=_config_int(cfg_text, "start_text_token", 0),
        stop_text_token=_config_int(cfg_text, "stop_text_token", 1),
        condition_num_latent=d["condition_num_latent"], semantic_dim=d["semantic_dim"],
        spk_cond_mode="campplus" if variant == "2.5" else "conformer")
    tts.semantic_model = Wav2Vec2BertModel(d["semantic_in"], d["semantic_dim"])
    tts.extract_features = SeamlessM4TFeatureExtractor(d["semantic_in"])
    tts.semantic_codec = RepCodec(d["codebook"], d["semantic_dim"])
    tts.s2mel = MyModel(d["model_dim"], d["semantic_dim"], d["content_dim"], d["dit_dim"], d["dit_heads"],
                        d["dit_layers"])
    tts.campplus_model = CAMPPlus(feat_dim=80, embedding_size=STYLE_DIM)
    tts.bigvgan = BigVGAN(d["voc_channels"])
    for i, m in enumerate((tts.gpt, tts.semantic_model, tts.semantic_codec, tts.s2mel, tts.campplus_model,
                           tts.bigvgan)):
        seeded_init(m, seed * 101 + i)
        m.to(dev).eval()
    g = torch.Generator().manual_seed(seed * 101 + 99)
    tts.semantic_mean = (torch.randn(d["semantic_dim"], generator=g) * 0.01).to(dev)
    tts.semantic_std = (1 + torch.rand(d["semantic_dim"], generator=g)).to(dev)
    tts.emo_num = _config_list(cfg_text, "emo_num")
    n = sum(tts.emo_num)
    tts.emo_matrix = torch.split(torch.randn(n, d["model_dim"], generator=g).to(dev), tts.emo_num)
    tts.spk_matrix = torch.split(torch.randn(n, STYLE_DIM, generator=g).to(dev), tts.emo_num)
    if variant == "2.5":
        tts.tokenizer = Tiktoken(tts.gpt.number_text_tokens)
        tts.text_process = TextProcess()
        tts.ja_text_process = JapaneseG2PProcessor()
    else:
        tts.normalizer = TextNormalizer()
        tts.tokenizer = TextTokenizer(tts.gpt.number_text_tokens, tts.normalizer)
    tts.stop_mel_token = tts.gpt.stop_mel_token
    tts.dtype = None
    mel_proj = torch.randn(1024, N_MELS, generator=g).to(dev) / 30

    def mel_fn(x):  # 22.05 kHz audio [1, n] -> log-mel-like frames [1, 80, n // 256]
        n = max(1, x.shape[-1] // HOP)
        frames = F.pad(x.reshape(1, -1), (0, n * HOP + 1024))[:, :n * HOP + 768].unfold(1, 1024, HOP)[:, :n]
        return (frames @ mel_proj).transpose(1, 2)

    tts.mel_fn = mel_fn
