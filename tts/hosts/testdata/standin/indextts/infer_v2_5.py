"""Stand-in for indextts.infer_v2_5 (tests only)."""

import torch

from indextts._standin import REAL_TORCH, StandIn, _log

if REAL_TORCH:  # what infer_v2_5 imports at its top, for the batching adapter
    from indextts._modules import apply_pronunciation_annotations, lang_to_token, nemo_text_normalize  # noqa: F401


class IndexTTS2(StandIn):
    tokens_per_second = 25
    variant = "2.5"

    def __init__(
            self, cfg_path="checkpoints/config.yaml", model_dir="checkpoints", use_bf16=False, device=None,
            use_cuda_kernel=None, use_deepspeed=False, use_accel=False, use_torch_compile=False, use_qwen_emo=False
    ):
        super().__init__(cfg_path, model_dir, use_cuda_kernel, use_deepspeed, use_qwen_emo, device)
        self.use_torch_compile = use_torch_compile
        _log(f"compile {bool(use_torch_compile)}")
        self.use_bf16 = use_bf16
        if hasattr(torch, "nn"):
            self.dtype = torch.bfloat16 if use_bf16 else None

    def split_text_by_tokens(self, text, max_tokens, lang_prefix=""):
        from indextts._modules import split_text_by_tokens

        return split_text_by_tokens(self, text, max_tokens, lang_prefix)

    def infer(self, spk_audio_prompt, text, output_path, lang,
              emo_audio_prompt=None, emo_alpha=1.0,
              emo_vector=None, use_emo_text=False, emo_text=None, use_random=False, interval_silence=200,
              verbose=False, max_text_tokens_per_segment=120, stream_return=False, more_segment_before=0,
              duration_factor=1.0, text_normalization=True,
              seed=None, diffusion_steps=25, inference_cfg_rate=0.7, cfm_temperature=1.0, **generation_kwargs):
        if not lang:
            raise ValueError("lang is required")
        if seed is not None:
            torch.manual_seed(seed)
        return self._infer(spk_audio_prompt, text, output_path, emo_audio_prompt, emo_alpha, emo_vector,
                           use_emo_text, emo_text, use_random, interval_silence, max_text_tokens_per_segment,
                           generation_kwargs.get("max_mel_tokens", 1500), duration_factor, lang)
