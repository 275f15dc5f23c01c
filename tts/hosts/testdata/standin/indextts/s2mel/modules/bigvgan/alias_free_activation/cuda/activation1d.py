"""Stand-in for BigVGAN's fused CUDA kernel module (tests only). The real module compiles
the kernel with nvcc/ninja when imported; INDEXTTS_STANDIN_KERNEL=fail makes the import
fail the way a missing nvcc does."""

import os

if os.environ.get("INDEXTTS_STANDIN_KERNEL") == "fail":
    raise RuntimeError("Ninja is required to load C++ extensions (stand-in)")

anti_alias_activation_cuda = "stand-in kernel"
