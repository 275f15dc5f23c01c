"""Decode-step attention read straight from the batching host's paged KV pool.

The plain way (batching.Batcher._forward without this module) gathers every row's
blocks into a contiguous [rows, tokens, heads, head_dim] copy per layer and tensor, then
runs scaled dot-product attention with a mask: each step reads the cache three times
(the gather's read and write, the attention's read) and its largest CUDA graph holds the
copies, 3.4 GB at 64 lines of the benchmark model. This kernel reads each row's keys and
values once, where they lie, following its block table, with the online softmax of
flash attention (fp32 scores and sums), for the k new tokens of every row at once.

A row's result depends on its own query, table and length only: not on the other rows,
the table's padded width or the batch's size, so a line decodes the same in any batch.

Triton compiles it on first use. The batcher first runs check(), which compiles it
and compares it with the plain arithmetic on random data, and gathers where it fails
(no Triton, no CUDA, a head size it does not take, a compiler that cannot write its
cache), saying why in /health.
"""

import math

try:
    import torch
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - machines without torch or Triton (the CPU tests)
    torch = None
    triton = None
    tl = None

# Keys per loop iteration: TILE_BLOCKS blocks of the pool.
TILE_BLOCKS = 2


def check(device, block_tokens, heads, head_dim, dtype, k):
    """Why the kernel cannot serve a pool of this shape and dtype on device for steps of
    k new tokens a row, or None when it can: it compiles and runs it on random data
    (two rows, one sharing a block with the other) against softmax(q k^T) v."""
    if triton is None or torch is None:
        return "Triton is not installed"
    if device.type != "cuda":
        return "not on CUDA"
    if head_dim not in (16, 32, 64, 128) or dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return f"head size {head_dim} or {dtype} is not one the kernel takes"
    try:
        g = torch.Generator(device=device).manual_seed(0)
        bt = block_tokens
        kc = torch.randn(5, bt, heads, head_dim, generator=g, device=device).to(dtype)
        vc = torch.randn(5, bt, heads, head_dim, generator=g, device=device).to(dtype)
        q = torch.randn(2, heads, k, head_dim, generator=g, device=device).to(dtype)
        # Row 0 ends in its second block (its table padded with block 0), row 1 in its
        # third; both start in block 1, as beams share their prompt's.
        table = torch.tensor([[1, 2, 0], [1, 3, 4]], device=device)
        lengths = torch.tensor([bt + bt // 4 - k, 3 * bt - bt // 4 - k], device=device)
        got = decode(q, kc, vc, table, lengths).float()
        for r in range(2):
            n = int(lengths[r]) + k
            keys = kc[table[r]].reshape(-1, heads, head_dim)[:n].float().transpose(0, 1)  # [H, n, hd]
            vals = vc[table[r]].reshape(-1, heads, head_dim)[:n].float().transpose(0, 1)
            s = q[r].float() @ keys.transpose(1, 2) / math.sqrt(head_dim)  # [H, k, n]
            pos = torch.arange(n, device=device)
            s = s.masked_fill(pos[None, None, :] > (n - k + torch.arange(k, device=device))[None, :, None],
                              float("-inf"))
            want = torch.softmax(s, dim=-1) @ vals
            err = (got[r] - want).abs().max().item()
            if not err < 0.05:
                return f"it differs from the plain arithmetic by {err:.3g}"
    except Exception as e:  # noqa: BLE001 (any failure means: gather instead)
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


if triton is not None:
    @triton.jit
    def _decode_kernel(q_ptr, k_ptr, v_ptr, table_ptr, len_ptr, out_ptr,
                       sq_r, sq_h, sq_t, s_table, s_len, scale,
                       H: tl.constexpr, HD: tl.constexpr, BT: tl.constexpr, K_NEW: tl.constexpr,
                       QP: tl.constexpr, TILE_BLOCKS: tl.constexpr, IEEE: tl.constexpr):
        r = tl.program_id(0)
        h = tl.program_id(1)
        qi = tl.arange(0, QP)
        d = tl.arange(0, HD)
        live = qi < K_NEW
        q = tl.load(q_ptr + r * sq_r + h * sq_h + qi[:, None] * sq_t + d[None, :], mask=live[:, None], other=0.0)
        length = tl.load(len_ptr + r * s_len)
        qpos = length + qi  # each new token's position; it sees every key up to its own
        total = length + K_NEW
        m = tl.full([QP], float("-inf"), tl.float32)
        s_sum = tl.zeros([QP], tl.float32)
        acc = tl.zeros([QP, HD], tl.float32)
        TILE: tl.constexpr = TILE_BLOCKS * BT
        key0 = tl.arange(0, TILE)
        for t in range(0, tl.cdiv(total, TILE)):
            key = t * TILE + key0
            valid = key < total
            blk = tl.load(table_ptr + r * s_table + key // BT, mask=valid, other=0)
            off = ((blk * BT + key % BT) * H + h) * HD
            kk = tl.load(k_ptr + off[:, None] + d[None, :], mask=valid[:, None], other=0.0)
            if IEEE:
                s = tl.dot(q, tl.trans(kk), input_precision="ieee")
            else:
                s = tl.dot(q, tl.trans(kk))
            # The first tile holds key 0, which every query sees: m is finite after it.
            s = tl.where((key[None, :] <= qpos[:, None]) & valid[None, :], s * scale, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            alpha = tl.exp(m - m_new)
            p = tl.exp(s - m_new[:, None])
            s_sum = s_sum * alpha + tl.sum(p, 1)
            vv = tl.load(v_ptr + off[:, None] + d[None, :], mask=valid[:, None], other=0.0)
            if IEEE:
                acc = acc * alpha[:, None] + tl.dot(p.to(vv.dtype), vv, input_precision="ieee")
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(vv.dtype), vv)
            m = m_new
        out = acc / s_sum[:, None]
        # out is [rows, k, heads, head_dim]: the layout the layer's projection reads.
        o = out_ptr + ((r * K_NEW + qi[:, None]) * H + h) * HD + d[None, :]
        tl.store(o, out.to(out_ptr.dtype.element_ty), mask=live[:, None])


def decode(q, k_cache, v_cache, table, lengths):
    """Attention of each row's k new tokens over its cache.

    q [R, H, k, hd] (its last dimension contiguous); k_cache, v_cache one layer of the
    pool, [blocks, BLOCK, H, hd], contiguous, this step's keys and values already
    written; table [R, W] int64 block ids (rows may be strided, entries not); lengths
    [R] int64 (strided or not), the cache length before
    this step's tokens (token j of row r sits at position lengths[r] + j). Returns
    [R, H, k, hd] (a transposed view of a [R, k, H, hd] tensor)."""
    n, heads, k, hd = q.shape
    bt = k_cache.shape[1]
    assert q.stride(-1) == 1 and table.stride(1) == 1 and k_cache.is_contiguous() and v_cache.is_contiguous()
    out = torch.empty(n, k, heads, hd, dtype=q.dtype, device=q.device)
    _decode_kernel[(n, heads)](
        q, k_cache, v_cache, table, lengths, out,
        q.stride(0), q.stride(1), q.stride(2), table.stride(0), lengths.stride(0), 1.0 / math.sqrt(hd),
        H=heads, HD=hd, BT=bt, K_NEW=k, QP=max(16, triton.next_power_of_2(k)), TILE_BLOCKS=TILE_BLOCKS,
        IEEE=q.dtype == torch.float32, num_warps=4, num_stages=2)
    return out.transpose(1, 2)
