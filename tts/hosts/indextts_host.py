#!/usr/bin/env python3
"""dubstudio model host for IndexTTS-2 and IndexTTS-2.5.

Wraps indextts.infer_v2.IndexTTS2 (or, with --variant 2.5, indextts.infer_v2_5.IndexTTS2)
behind the model-host protocol (protocol.py, docs/engines.md): one model, one request at
a time, on the GPU this process sees (pin it with CUDA_VISIBLE_DEVICES).

The model itself (its loading, caps, languages and speaker cache) is indextts_model.py;
with --batch this process serves indextts_batching.py's batching host (protocol 2) instead.

Before loading, the host checks the install (indextts_check.py: the model directory's
files, config.yaml against the checkpoint's shapes, hf_cache/) and refuses to start on a
failure, since IndexTTS would otherwise load a wrong config leniently and render noise.
`--check` runs the same checks (and builds the BigVGAN kernel) without serving: it is
what `dubstudio doctor` calls.

Run it in IndexTTS's Python environment with the index-tts checkout on PYTHONPATH:

    CUDA_VISIBLE_DEVICES=0 HF_HUB_OFFLINE=1 python3 tts/hosts/indextts_host.py \
        --model-dir checkpoints --variant 2 --fp16 --socket /run/dubstudio/gpu0-0.sock
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import batching  # noqa: E402 (its options; it imports torch only if present)
import indextts_check  # noqa: E402
import indextts_model  # noqa: E402
import protocol  # noqa: E402 (the shared module lives next to this file)
from protocol import env, env_bool  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", default=env("INDEXTTS_MODEL_DIR", "checkpoints"))
    p.add_argument("--cfg", default=env("INDEXTTS_CFG"), help="default: <model-dir>/config.yaml")
    p.add_argument("--variant", default=env("INDEXTTS_VARIANT", "2"), choices=sorted(indextts_model.VARIANTS))
    p.add_argument("--model-version", default=env("INDEXTTS_MODEL_VERSION"),
                   help="version string for /health and cache keys (default IndexTTS-<variant>)")
    p.add_argument("--fp16", action="store_true", default=env_bool("INDEXTTS_FP16", False),
                   help="half precision (2: use_fp16, 2.5: use_bf16)")
    p.add_argument("--cuda-kernel", dest="cuda_kernel", action="store_true", default=env_bool("INDEXTTS_CUDA_KERNEL"))
    p.add_argument("--no-cuda-kernel", dest="cuda_kernel", action="store_false")
    p.add_argument("--deepspeed", action="store_true", default=env_bool("INDEXTTS_DEEPSPEED", False))
    p.add_argument("--torch-compile", action="store_true", default=env_bool("INDEXTTS_TORCH_COMPILE", False),
                   help="IndexTTS2's use_torch_compile: s2mel's flow-matching estimator under torch.compile "
                        "(PyTorch 2; a compile at the first line)")
    p.add_argument("--qwen-emo", dest="qwen_emo", action="store_true", default=env_bool("INDEXTTS_QWEN_EMO", False))
    p.add_argument("--no-qwen-emo", dest="qwen_emo", action="store_false")
    p.add_argument("--device", default=env("INDEXTTS_DEVICE"))
    p.add_argument("--check", action="store_true",
                   help="check the install (one line per check), build the BigVGAN kernel, and exit: 1 when a check fails")
    p.add_argument("--json", action="store_true", help="with --check: one JSON object per line")
    # The batching host (protocol 2, indextts_batching.py): one process per GPU.
    p.add_argument("--batch", action="store_true", default=env_bool("INDEXTTS_BATCH", False),
                   help="one batching host for the GPU (protocol 2): many lines decode in one batch")
    p.add_argument("--max-sequences", type=int, default=int(env("INDEXTTS_MAX_SEQUENCES", "32")),
                   help="with --batch: the most lines decoding at once")
    p.add_argument("--beams", type=int, default=int(env("INDEXTTS_BEAMS", "3")),
                   help="with --batch: beams per sequence (3 as IndexTTS; 1 samples: --top-k, --top-p, --temperature)")
    p.add_argument("--kv-cache-bytes", type=int, default=int(env("INDEXTTS_KV_CACHE_BYTES", "0")),
                   help="with --batch: the paged KV cache's size (0: 40%% of the memory free after load)")
    p.add_argument("--s2mel-batch", type=int, default=int(env("INDEXTTS_S2MEL_BATCH", "16")),
                   help="with --batch: the most lines in one s2mel and vocoder batch")
    p.add_argument("--s2mel-max-wait", type=float, default=float(env("INDEXTTS_S2MEL_MAX_WAIT", "5")),
                   help="with --batch: seconds a line waits for s2mel before it goes first, whatever its length")
    p.add_argument("--diffusion-steps", type=int, default=int(env("INDEXTTS_DIFFUSION_STEPS", "25")),
                   help="with --batch: s2mel's flow-matching steps (25 as IndexTTS2.infer)")
    batching.add_decode_args(p, "INDEXTTS")
    p.add_argument("--s2mel-dtype", default=env("INDEXTTS_S2MEL_DTYPE", "fp32"), choices=("fp32", "bf16"),
                   help="with --batch: s2mel's DiT in bf16, its Euler updates, conditioning and BigVGAN in fp32 "
                        "(fp32: as IndexTTS2.infer)")
    p.add_argument("--return-codes", action="store_true", help=argparse.SUPPRESS)  # tests: the mel codes
    protocol.add_listen_args(p)
    return p.parse_args(argv)


def main(argv=None):
    opts = parse_args(argv)
    if opts.check:
        results = indextts_check.check_install(opts.model_dir, opts.variant, opts.cfg, qwen_emo=opts.qwen_emo,
                                               cuda_kernel=opts.cuda_kernel)
        indextts_check.print_results(results, opts.json)
        return 1 if indextts_check.failed(results) else 0
    if opts.batch:
        import indextts_batching  # noqa: PLC0415 (version-1 hosts never load it)

        return protocol.run_host(None, opts, host=indextts_batching.batching_host(opts))
    if opts.s2mel_dtype != "fp32":
        print("indextts_host: --s2mel-dtype bf16 needs --batch (the one-request host runs IndexTTS2.infer, whose "
              "s2mel is fp32)", file=sys.stderr)
        return 2
    return protocol.run_host(indextts_model.IndexTTSBackend(opts), opts)


if __name__ == "__main__":
    sys.exit(main())
