"""The benchmark vocoder's anti-aliased activation as one kernel.

bench_host.AntiAliasSnake runs BigVGAN's alias-free snake as four kernels: a 2x
up-sampling (a depthwise transposed convolution with a 12-tap filter), the snake
(x + sin(alpha x)^2 / alpha), a replicate padding and a 2x down-sampling (a depthwise
strided convolution with the same filter). Between them the up-sampled signal, twice
the input's length, goes through memory four times, and cuDNN's depthwise transposed
convolution is slow (on an H200 at 16 lines in flight it alone was 0.53 of the
vocoder's 1.53 s of kernels). This kernel reads the input once and writes the output
once: each output sample takes the 12 up-sampled samples its down-sampling filter
covers, each the sum of the 6 input samples its up-sampling phase covers, through the
snake, in fp32. BigVGAN's own CUDA kernel (IndexTTS2's use_cuda_kernel, the IndexTTS
host's --cuda-kernel) fuses the same steps.

Triton compiles it on first use. The host first runs check(), which compiles it and
compares it with the module's own four steps in float64 on random data, and keeps the
four steps where it fails (no Triton, no CUDA), saying why in /health.
"""

try:
    import torch
except ImportError:  # pragma: no cover - machines without torch
    torch = None
try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - machines without Triton (the CPU tests)
    triton = None
    tl = None

TAPS = 12  # the filter's length; its padding (5 up, 5 and 6 down) follows from it
BLOCK = 512  # output samples per program


def reference(x, alpha, filt):
    """The four steps, as bench_host.AntiAliasSnake runs them without the kernel: x
    [B, C, T], alpha [1, C, 1], filt [C, 1, TAPS] (one depthwise filter a channel, the
    same in each) -> [B, C, T]."""
    c = x.shape[1]
    u = torch.nn.functional.conv_transpose1d(x, filt, stride=2, padding=5, groups=c)
    u = u + torch.sin(alpha * u).pow(2) / (alpha + 1e-9)
    return torch.nn.functional.conv1d(torch.nn.functional.pad(u, (5, 6), mode="replicate"), filt, stride=2, groups=c)


def check(device):
    """Why the kernel cannot serve on device, or None when it can: it compiles and runs
    it on random signals, short (shorter than the filter) and long, against
    reference() in float64."""
    if device.type != "cuda":
        return "not on CUDA"
    if triton is None:
        return "Triton is not installed"
    try:
        g = torch.Generator(device=device).manual_seed(0)
        for b, c, t in ((2, 3, 1), (1, 2, 5), (3, 5, 1500)):
            x = torch.randn(b, c, t, generator=g, device=device)
            alpha = torch.rand(1, c, 1, generator=g, device=device) + 0.5
            filt = (torch.rand(TAPS, generator=g, device=device) / 6).expand(c, 1, TAPS).contiguous()
            got = snake_resample(x, alpha, filt).double()
            want = reference(x.double(), alpha.double(), filt.double())
            err = (got - want).abs().max().item()
            if not err < 1e-4:
                return f"it differs from the four steps by {err:.3g} on [{b}, {c}, {t}]"
    except Exception as e:  # noqa: BLE001 (any failure means: the four steps instead)
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


if triton is not None:
    @triton.jit(do_not_specialize=["C", "T"])  # T of 1 or 2 takes the masked loads' path as any other
    def _snake_kernel(x_ptr, y_ptr, alpha_ptr, f_ptr, C, T, BLOCK: tl.constexpr):
        row = tl.program_id(0)  # one channel of one line: b * C + c
        a = tl.load(alpha_ptr + row % C).to(tl.float32)
        inv = 1.0 / (a + 1e-9)
        base = x_ptr + row.to(tl.int64) * T
        j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        # The up-sampled signal's ends, which the replicate padding repeats: u(0) and
        # u(2T - 1), from the input samples their phases cover.
        x0 = tl.load(base).to(tl.float32)
        x1 = tl.load(base + 1, mask=T > 1, other=0.0).to(tl.float32)
        x2 = tl.load(base + 2, mask=T > 2, other=0.0).to(tl.float32)
        u0 = x0 * tl.load(f_ptr + 5) + x1 * tl.load(f_ptr + 3) + x2 * tl.load(f_ptr + 1)
        y1 = tl.load(base + T - 1).to(tl.float32)
        y2 = tl.load(base + T - 2, mask=T > 1, other=0.0).to(tl.float32)
        y3 = tl.load(base + T - 3, mask=T > 2, other=0.0).to(tl.float32)
        ul = y1 * tl.load(f_ptr + 6) + y2 * tl.load(f_ptr + 8) + y3 * tl.load(f_ptr + 10)
        s0 = u0 + tl.sin(a * u0) * tl.sin(a * u0) * inv
        sl = ul + tl.sin(a * ul) * tl.sin(a * ul) * inv
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for t in tl.static_range(12):
            # Tap t of output j reads up-sampled sample n = 2j + t - 5, which is input
            # sample j + t // 2 - q under up-sampling tap t % 2 + 2q.
            u = tl.zeros([BLOCK], dtype=tl.float32)
            for q in tl.static_range(6):
                i = j + (t // 2 - q)
                xv = tl.load(base + i, mask=(i >= 0) & (i < T), other=0.0).to(tl.float32)
                u += xv * tl.load(f_ptr + (t % 2 + 2 * q))
            sn = tl.sin(a * u)
            s = u + sn * sn * inv
            n = 2 * j + (t - 5)
            s = tl.where(n < 0, s0, tl.where(n > 2 * T - 1, sl, s))
            acc += tl.load(f_ptr + t) * s
        tl.store(y_ptr + row.to(tl.int64) * T + j, acc.to(y_ptr.dtype.element_ty), mask=j < T)


def snake_resample(x, alpha, filt):
    """reference() as one kernel: x [B, C, T] on CUDA (fp32, bf16 or fp16), alpha
    [1, C, 1], filt [C, 1, TAPS] (the kernel reads channel 0's: every channel's is the
    same) -> [B, C, T] in x's dtype, computed in fp32."""
    x = x.contiguous()
    b, c, t = x.shape
    y = torch.empty_like(x)
    if x.numel():
        _snake_kernel[(b * c, triton.cdiv(t, BLOCK))](
            x, y, alpha.reshape(-1).contiguous(), filt[0, 0].float().contiguous(), c, t, BLOCK=BLOCK,
            num_warps=4)
    return y
