"""CUDA streams on a share of the GPU's streaming multiprocessors (a green context).

The batching host's s2mel stage launches large kernels that take every SM; the GPT's
decode step, a few hundred small kernels in a row, then waits at each of its kernels
for SMs to free, whatever its stream's priority: a priority orders the blocks that
wait to run, it does not stop the ones running. With s2mel and the vocoder on a green
context of part of the SMs, the rest are the GPT's at every moment, and the GPT keeps
all of them while s2mel is idle (its stream stays on the whole device).

streams(device, sms, n) gives n streams of a green context of at least sms SMs and the
SMs it holds (the driver rounds up to its granularity, 8 on Hopper). It uses PyTorch's
GreenContext where that has streams of its own (GreenContext.Stream), and the CUDA
driver through cuda-python's bindings otherwise; both need CUDA 12.4 or later. It
raises RuntimeError with the reason where neither can. Kernels launched into these
streams from any thread run on the context's SMs; memory is the device's, shared with
every other stream of the process.
"""

try:
    import torch
except ImportError:  # pragma: no cover - machines without torch
    torch = None

_kept = []  # green contexts live as long as the process: their streams need them


def streams(device, sms, n):
    """n torch streams on a green context of at least sms SMs of device, and the SMs
    the context holds."""
    if device.type != "cuda":
        raise RuntimeError("SM partitions need a CUDA device")
    total = torch.cuda.get_device_properties(device).multi_processor_count
    if not 0 < sms < total:
        raise RuntimeError(f"{sms} SMs: a partition takes at least 1 and fewer than the device's {total}")
    errors = []
    for make in (_torch_streams, _driver_streams):
        try:
            return make(device, sms, n)
        except Exception as e:  # noqa: BLE001 (the next way, then every reason)
            errors.append(f"{make.__name__.strip('_')}: {e}")
    raise RuntimeError("; ".join(errors))


def _torch_streams(device, sms, n):
    gc = getattr(torch.cuda, "green_contexts", None)
    if gc is None or not getattr(gc, "SUPPORTED", False):
        raise RuntimeError("this PyTorch has no green contexts")
    if not hasattr(gc.GreenContext, "Stream"):
        # Earlier versions only make the context current on a thread, on its legacy
        # default stream, where CUDA graphs cannot be captured.
        raise RuntimeError(f"PyTorch {torch.__version__}'s GreenContext has no streams of its own")
    ctx = gc.GreenContext.create(num_sms=sms, device_id=device.index or 0)
    _kept.append(ctx)
    out = []
    for _ in range(n):
        s = ctx.Stream()
        if all(s != o for o in out):
            out.append(s)
    return out, sms


def _check(result):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver error {int(err)} ({err})")
    return rest[0] if len(rest) == 1 else rest


def _driver_streams(device, sms, n):
    from cuda.bindings import driver as cu  # noqa: PLC0415 (cuda-python, only here)

    torch.cuda.init()  # the primary context first: the green context retains it
    dev = _check(cu.cuDeviceGet(device.index or 0))
    whole = _check(cu.cuDeviceGetDevResource(dev, cu.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM))
    groups, count, _rest = _check(cu.cuDevSmResourceSplitByCount(1, whole, 0, sms))
    if count < 1:
        raise RuntimeError(f"the driver made no group of {sms} SMs")
    desc = _check(cu.cuDevResourceGenerateDesc([groups[0]], 1))
    ctx = _check(cu.cuGreenCtxCreate(desc, dev, cu.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM))
    _kept.append(ctx)
    out = []
    for _ in range(n):
        s = _check(cu.cuGreenCtxStreamCreate(ctx, cu.CUstream_flags.CU_STREAM_NON_BLOCKING, 0))
        _kept.append(s)
        out.append(torch.cuda.ExternalStream(int(s), device=device))
    return out, int(groups[0].sm.smCount)
