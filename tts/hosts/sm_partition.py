"""CUDA streams on a share of the GPU's streaming multiprocessors (a green context).

The batching host's s2mel stage launches large kernels that take every SM; the GPT's
decode step, a few hundred small kernels in a row, then waits at each of its kernels
for SMs to free, whatever its stream's priority: a priority orders the blocks that
wait to run, it does not stop the ones running. With s2mel and the vocoder on a green
context of part of the SMs, the rest are the GPT's at every moment, and the GPT keeps
all of them while s2mel is idle (its stream stays on the whole device).

streams(device, sms, n) gives n streams of a green context of sms SMs, through
PyTorch's GreenContext (its streams of their own came with 2.11; earlier versions only
make the context current on one thread's legacy default stream, where CUDA graphs
cannot be captured). It raises RuntimeError with the reason where it cannot. Kernels
launched into these streams from any thread run on the context's SMs; memory is the
device's, shared with every other stream of the process.
"""

try:
    import torch
except ImportError:  # pragma: no cover - machines without torch
    torch = None

_kept = []  # green contexts live as long as the process: their streams need them


def streams(device, sms, n):
    """n torch streams (fewer where the context hands out the same one again) on a
    green context of sms SMs of device."""
    if device.type != "cuda":
        raise RuntimeError("SM partitions need a CUDA device")
    total = torch.cuda.get_device_properties(device).multi_processor_count
    if not 0 < sms < total:
        raise RuntimeError(f"{sms} SMs: a partition takes at least 1 and fewer than the device's {total}")
    gc = getattr(torch.cuda, "green_contexts", None)
    if gc is None or not getattr(gc, "SUPPORTED", False):
        raise RuntimeError(f"PyTorch {torch.__version__} has no green contexts")
    if not hasattr(gc.GreenContext, "Stream"):
        raise RuntimeError(f"PyTorch {torch.__version__}'s GreenContext has no streams of its own (2.11 has)")
    ctx = gc.GreenContext.create(num_sms=sms, device_id=device.index or 0)
    _kept.append(ctx)
    out = []
    for _ in range(n):
        s = ctx.Stream()
        if all(s != o for o in out):
            out.append(s)
    return out
