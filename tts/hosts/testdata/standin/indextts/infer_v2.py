"""Stand-in for indextts.infer_v2 (tests only)."""

import torch

from indextts._standin import StandIn, _log


class IndexTTS2(StandIn):
    def __init__(
            self, cfg_path="checkpoints/config.yaml", model_dir="checkpoints", use_fp16=False, device=None,
            use_cuda_kernel=None, use_deepspeed=False, use_accel=False, use_torch_compile=False,
            use_qwen_emo=True, aux_paths=None
    ):
        super().__init__(cfg_path, model_dir, use_cuda_kernel, use_deepspeed, use_qwen_emo, device)
        self.use_torch_compile = use_torch_compile
        _log(f"compile {bool(use_torch_compile)}")
        self.use_fp16 = use_fp16
        if hasattr(torch, "nn"):
            self.dtype = torch.float16 if use_fp16 else None

    def infer(self, spk_audio_prompt, text, output_path,
              emo_audio_prompt=None, emo_alpha=1.0,
              emo_vector=None,
              use_emo_text=False, emo_text=None, use_random=False, interval_silence=200,
              verbose=False, max_text_tokens_per_segment=120, stream_return=False, more_segment_before=0,
              **generation_kwargs):
        if "duration_factor" in generation_kwargs:
            raise TypeError("IndexTTS-2 has no duration_factor")
        return self._infer(spk_audio_prompt, text, output_path, emo_audio_prompt, emo_alpha, emo_vector,
                           use_emo_text, emo_text, use_random, interval_silence, max_text_tokens_per_segment,
                           generation_kwargs.get("max_mel_tokens", 1500), 1.0)
