"""The batching model host (protocol version 2): one process per GPU, one copy of the
weights, many syntheses at once.

    GPT     continuous batching: a line's sequences join the running batch at any
            decode step (after a prefill of their own) and leave when they reach their
            limit or emit the stop token. Every sequence keeps its own KV cache in a
            preallocated paged pool (blocks of BLOCK_TOKENS tokens, reference-counted,
            so the beams of a sequence share their prompt's blocks and a beam that takes
            over another's history copies one block, not the history). Beams are rows of
            the batch; each sequence has its own scores, repetition memory and limit.
            One beam samples as IndexTTS2.infer does (top-k 30, top-p 0.8,
            temperature 0.8, repetition penalty 10), its noise keyed by its line's
            seed and its step, so batching does not change its draw; --greedy makes
            one beam take the likeliest token (the deterministic tests' mode).
    s2mel   the GPT thread hands finished lines to a second thread, which batches their
            latents pass, flow-matching steps (classifier-free guidance, per-line seeded
            noise, padded positions masked) and vocoder, grouped by length. The GPT loop
            does not wait for it; each thread has its own CUDA stream.
    memory  the KV pool is allocated at load (it is part of resident_bytes); a line is
            admitted into the pool when the blocks it can ever need are free, and waits
            in the host otherwise. A line that could never fit is refused. A CUDA
            out-of-memory error inside a batch fails the lines of that batch as retryable
            (out_of_memory) and the host goes on serving the others.

The model-specific parts are an adapter (BenchAdapter in bench_host.py); this module is
the one batching core. It needs torch only when it serves; it imports without it.
"""

import argparse
import contextlib
import dataclasses
import math
import os
import queue
import sys
import threading
import time
import wave

import paged_attention
import protocol
import sm_partition
from protocol import OUT_OF_MEMORY, UNAVAILABLE, HostError, invalid

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - machines without torch
    torch = None
    F = None

PROTOCOL_VERSION = 2
BLOCK_TOKENS = 32
# IndexTTS2.infer's generation defaults (docs/indextts.md): with one beam a sequence
# samples with these; beam search (more beams) uses the temperature and the penalty.
TOP_K = 30
TOP_P = 0.8
TEMPERATURE = 0.8
REPETITION_PENALTY = 10.0
# Seconds a line may wait for s2mel before it goes first, whatever its length.
S2MEL_MAX_WAIT = 5.0
# The padding an s2mel group may carry: its longest line's frames (the reference's
# prompt and the line's own, which the DiT attends over together) at most 1 + this
# times its shortest's. A padded frame costs what a real one does: on an H200 at 16
# lines in flight, 0.25 gave p95 of lines up to 5 s of 1.39-2.74 s over four passes
# (median 1.57), 0.5 1.81-2.12 s and 1.0 2.27-2.75 s (docs/benchmarks.md).
S2MEL_WASTE = 0.25
# Whether lines join s2mel's table at its next step, each row at its own step
# (S2MelTable), or a group of lines (group_of) runs its steps through before the next.
# An earlier try, a group of less work beginning beside the one running and stepped in
# turn with it, was dropped: on an H200 at 16 lines in flight p95 of lines up to 5 s was
# 1.32-2.85 s against 1.47-1.65 s without (docs/benchmarks.md).
S2MEL_ROLLING = False
# Lines of at most this many seconds (and first lines) run s2mel and the vocoder on a
# second s2mel thread (S2MelLane) whose streams go before the first thread's, beside its
# group instead of after it: a short line's s2mel then waits for no long line's. 0: one
# thread for every line.
S2MEL_EXPRESS = 0.0
# The same for the lines the vocoder runs at once (their own frames, no prompt): it
# gains little from a batch (on an H200, a 5 s line took 0.033 s alone and 0.028 s in
# a batch of 16), so it runs lines of about one length together, the shortest first.
VOCODER_WASTE = 0.25
# The decode step's CUDA graphs: sequences of the batch (each its beams' rows) rounded up
# to one of these, block tables to a multiple of GRAPH_WIDTH_STEP blocks (the padding
# costs attention over at most 3 masked blocks a row).
GRAPH_SEQUENCES = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256)
GRAPH_WIDTH_STEP = 4
# A prefill's CUDA graphs, one per prompt of whole blocks, are recorded at load for
# prompts of the conditioning and up to this many text tokens (IndexTTS' cap on a
# segment, 200, and its start and stop tokens); a longer prompt is run eagerly.
PREFILL_GRAPH_TEXT_TOKENS = 208


def attention(q, k, v, mask=None, causal=False):
    """Scaled dot-product attention; mask is boolean (True = attend). Uses PyTorch's
    fused kernel where it exists (2.0 and later) and the same arithmetic spelled out on
    older versions (the CPU tests run on Debian's 1.13)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal and mask is None:
        t, s = q.shape[-2], k.shape[-2]
        mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# SWITCH_INTERVAL is the GIL switch interval a batching host runs with (Python's
# default is 5 ms).
SWITCH_INTERVAL = 0.0002


def use_expandable_segments():
    """Lets PyTorch's allocator grow and shrink its segments: a batching host's
    temporaries change size at every decode step and every s2mel group, and with fixed
    segments the reserve they leave behind grew to 17 GiB beyond the memory in use (one
    H200, 64 lines at once), which the worker must count as taken. On the card shrunk to
    24 GiB the host then peaked 7 GB lower and rendered 15% more (bench/results/
    2026-12-02-admission). A setting the operator gave in PYTORCH_CUDA_ALLOC_CONF stays."""
    if torch is not None and torch.cuda.is_available() and not os.environ.get("PYTORCH_CUDA_ALLOC_CONF"):
        settings = getattr(torch._C, "_accelerator_setAllocatorSettings", None) or \
            torch.cuda.memory._set_allocator_settings
        settings("expandable_segments:True")


# ---------------------------------------------------------------------------------------
# CUDA graphs
#
# A batching host is bound by kernel launches, not by the GPU: profiled at 64 lines in
# flight, 209k launches took 2.4 s of CPU in cudaLaunchKernel alone over an 11.5 s run
# (bench/results/2026-12-02-admission). A CUDA graph records a function's kernels once,
# for one shape, and replays them with one launch. The batcher pads its tensors to a
# few shapes (buckets) and keeps a graph per bucket.


def bucket_up(n, buckets):
    """The smallest bucket at least n, or None when n passes the largest."""
    for b in buckets:
        if b >= n:
            return b
    return None


def _no_autocast_cache():
    """Inside an autocast region, the same region without its cache of cast weights:
    a cast made while a graph is captured lives in the graph's pool, and the cache lets
    it go when the region ends, so a later capture could reuse memory a graph still
    reads (PyTorch's CUDA graph notes ask for cache_enabled=False)."""
    if hasattr(torch, "get_autocast_dtype"):  # PyTorch 2.4 and later
        on, dtype = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    else:
        on, dtype = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
    return torch.autocast("cuda", dtype=dtype, cache_enabled=False) if on else contextlib.nullcontext()


def decode_buckets(most_sequences, beams, max_positions, pool_blocks):
    """The decode graphs' buckets: rows (beams times GRAPH_SEQUENCES below
    most_sequences, then the first at least it: a step's beam search needs whole
    sequences), block-table widths (multiples of GRAPH_WIDTH_STEP, then the model's
    positions in blocks) and the (rows, width) pairs to capture. A pair whose gathered
    keys and values (rows x blocks) pass the pool's blocks is left out and runs
    eagerly: its temporaries would be held for good, for a batch a cache that small
    rarely holds (on 24 GiB, 192 rows of 75 blocks would hold 3.4 GB)."""
    seqs = [n for n in GRAPH_SEQUENCES if n < most_sequences]
    rows = [beams * n for n in seqs + [bucket_up(most_sequences, GRAPH_SEQUENCES) or most_sequences]]
    blocks = math.ceil(max_positions / BLOCK_TOKENS)
    widths = list(range(GRAPH_WIDTH_STEP, blocks, GRAPH_WIDTH_STEP)) + [blocks]
    return rows, widths, [(r, w) for r in rows for w in widths if r * w <= pool_blocks]


# Held while a graph is captured and while the allocator's cache is emptied: emptying
# it asserts that no capture is under way on the device, in any thread, so a lazy
# capture on the s2mel thread and an empty_cache on the GPT thread must not overlap.
CAPTURE_LOCK = threading.Lock()


def empty_cache():
    """torch.cuda.empty_cache, never during a capture."""
    with CAPTURE_LOCK:
        torch.cuda.empty_cache()


@dataclasses.dataclass
class Graph:
    graph: object
    inputs: tuple  # the tensors every replay reads: write a call's inputs into these
    output: object  # what the capture returned; every replay overwrites it
    bytes: int  # the memory of the function's temporaries, in the shared pool

    def replay(self):
        self.graph.replay()
        return self.output


class GraphCache:
    """CUDA graphs of one function fn(*tensors), one per key (a bucket of shapes),
    sharing one memory pool. The graphs of one cache run one at a time, on the
    caller's stream, so they share their temporaries; the caller owns the tensors a
    graph reads (views of buffers it keeps, so that graphs need not hold inputs of
    their own) and should have fn write its result into a buffer it owns too.

    Captures run on a side stream, the first after one warm-up call there (lazy
    initialisations, cuBLAS workspaces); capture_error_mode "thread_local" lets the
    host's other stage go on launching from its own thread meanwhile."""

    def __init__(self, fn, device):
        self.fn = fn
        self.device = device
        self.pool = torch.cuda.graph_pool_handle()
        # One capture stream for every graph: the allocator reuses a freed block only on
        # the stream it was allocated on, so a stream per capture would give each graph
        # memory of its own (38 GiB for the benchmark model's 209 decode graphs).
        self.side = torch.cuda.Stream(device)
        self.graphs = {}
        self.capture_seconds = 0.0

    def __len__(self):
        return len(self.graphs)

    def get(self, key):
        return self.graphs.get(key)

    def reset(self):
        """Drops every graph and starts a new pool: a pool whose graphs are all gone
        cannot take another capture (PyTorch keeps it, unused, until the next
        empty_cache), and its memory goes back."""
        self.graphs.clear()
        self.pool = torch.cuda.graph_pool_handle()
        empty_cache()

    def capture(self, key, inputs, stream=None, warm=False):
        """Records fn(*inputs) as the graph of key (inputs: device tensors), on stream
        where given (every capture of a cache on the same one), else on the cache's
        side stream. Before the first capture (before every one with warm: a compiled
        fn may compile again for new shapes, which must not happen inside a capture)
        fn runs once for real, as a warm-up: where it writes into its inputs, write
        them again before the first replay."""
        t = time.perf_counter()
        cur = torch.cuda.current_stream(self.device)
        side = stream or self.side
        side.wait_stream(cur)
        graph = torch.cuda.CUDAGraph()
        with CAPTURE_LOCK, torch.cuda.stream(side):
            if warm or not self.graphs:
                self.fn(*inputs)  # warm-up, outside the graph: lazy initialisations
            side.synchronize()
            before = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            graph.capture_begin(pool=self.pool, capture_error_mode="thread_local")
            try:
                out = self.fn(*inputs)
            except BaseException:
                with contextlib.suppress(Exception):  # the capture's own error is the one to see
                    graph.capture_end()
                raise
            graph.capture_end()
            peak = torch.cuda.max_memory_allocated(self.device) - before
        cur.wait_stream(side)
        g = Graph(graph=graph, inputs=tuple(inputs), output=out, bytes=max(0, peak))
        self.graphs[key] = g
        self.capture_seconds += time.perf_counter() - t
        return g


# ---------------------------------------------------------------------------------------
# Sampling with one beam
#
# A sequence's noise is a function of (its line's seed, its segment, the tokens it has
# made, the token id) and nothing else: counter-based, like Philox, but spelled in a few
# integer kernels that give the same bits on the CPU and on CUDA. A line therefore
# samples the same tokens alone and in a batch that others join and leave, as long as
# its logits are the same (fp32: they are; fp16: see docs/engines.md). A generator per
# sequence would do too, at one launch per sequence and step.

MASK32 = 0xFFFFFFFF


def _mul32(x, c):
    """x * c mod 2**32 for x in [0, 2**32) (a Python int or an int64 tensor): in two
    16-bit halves of c, so no product passes 2**49 and int64 never overflows."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & MASK32


def hash32(x):
    """A 32-bit integer hash (Wellons' lowbias32): a bijection of [0, 2**32) whose
    output bits each depend on every input bit. Works on Python ints and int64 tensors
    alike."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def sequence_key(seed, index):
    """The noise key of a line's index-th segment (any integer seed, negative too)."""
    s = seed & 0xFFFFFFFFFFFFFFFF
    return hash32(hash32(hash32(s & MASK32) ^ (s >> 32)) ^ (index & MASK32))


def gumbel(keys, tokens):
    """Gumbel noise for tokens [R, K] (token ids) of rows keyed by keys [R] (int64, one
    per row and step): -log(-log(u)) with u uniform in (0, 1) on 32 bits, in float64 (in
    float32 the largest u rounds to 1 and its noise to infinity), returned as float32."""
    x = hash32(hash32(tokens) ^ keys[:, None])
    return gumbel_of(hash32(x ^ hash32(keys)[:, None]))


def gumbel_of(bits):
    """Gumbel noise of 32 random bits (an int64 tensor in [0, 2**32)): finite at both
    ends."""
    u = (bits.double() + 0.5) / float(1 << 32)
    return (-torch.log(-torch.log(u))).float()


def sample_tokens(logits, keys, top_k=TOP_K, top_p=TOP_P, temperature=TEMPERATURE):
    """One token per row of logits [R, V] (already penalised), as HF's sampling warpers
    choose it: temperature, then the top_k most likely (0: all), then the fewest of
    those whose probability reaches top_p; drawn by the Gumbel-max trick (the most
    likely of scores plus noise is a draw from their softmax), the noise keyed by row
    and token id, so a row's draw does not depend on the other rows. Returns [R]."""
    v = logits.shape[-1]
    k = v if top_k <= 0 else min(top_k, v)
    scores, idx = logits.topk(k, dim=-1)  # sorted, most likely first
    scores = scores / temperature
    if top_p < 1:
        probs = torch.softmax(scores, dim=-1)
        before = probs.cumsum(-1) - probs  # the mass of the likelier tokens
        scores = scores.masked_fill(before >= top_p, float("-inf"))  # the first always stays
    pick = (scores + gumbel(keys, idx)).argmax(dim=-1)
    return idx.gather(1, pick[:, None])[:, 0]


def add_decode_args(p, prefix):
    """The options both batching hosts share (one-beam sampling, the decode step's CUDA
    graphs and attention, s2mel's groups and SMs), each with an environment variable
    prefix_NAME."""
    env, env_bool = protocol.env, protocol.env_bool
    p.add_argument("--no-decode-graphs", dest="decode_graphs", action="store_false",
                   default=not env_bool(prefix + "_NO_DECODE_GRAPHS", False),
                   help="with --batch on CUDA: launch the decode step's and the prefill's kernels one by one instead "
                        "of replaying their CUDA graphs (recorded at load, one per bucket of rows and blocks, one "
                        "per prompt of whole blocks)")
    p.add_argument("--no-paged-attention", dest="paged", action="store_false",
                   default=not env_bool(prefix + "_NO_PAGED_ATTENTION", False),
                   help="with --batch on CUDA: gather each row's KV blocks into a copy for the decode step's "
                        "attention instead of reading them in place (paged_attention.py, needs Triton)")
    p.add_argument("--s2mel-sms", type=int, default=int(env(prefix + "_S2MEL_SMS", "0")),
                   help="with --batch on CUDA: run s2mel and the vocoder on a green context of this many SMs, "
                        "the rest left to the GPT's decode step at every moment (0: they share every SM)")
    p.add_argument("--s2mel-waste", type=float, default=float(env(prefix + "_S2MEL_WASTE", str(S2MEL_WASTE))),
                   help="with --batch: the padding an s2mel group may carry, its longest line's frames (prompt "
                        f"and target) at most 1 + this times its shortest's ({S2MEL_WASTE})")
    p.add_argument("--s2mel-rolling", action=argparse.BooleanOptionalAction,
                   default=env_bool(prefix + "_S2MEL_ROLLING", S2MEL_ROLLING),
                   help="with --batch: a line joins s2mel at its next flow-matching step, each sequence at its own "
                        f"step, instead of in a group that runs its steps through ({S2MEL_ROLLING})")
    p.add_argument("--s2mel-express", type=float, default=float(env(prefix + "_S2MEL_EXPRESS", str(S2MEL_EXPRESS))),
                   help="with --batch: lines of at most this many seconds, and first lines, run s2mel and the vocoder "
                        "on a second thread whose CUDA streams go before the first's, beside its group "
                        f"(0: one thread for every line; {S2MEL_EXPRESS})")
    p.add_argument("--greedy", action="store_true", default=env_bool(prefix + "_GREEDY", False),
                   help="with --batch --beams 1: take the likeliest token instead of sampling (deterministic)")
    p.add_argument("--top-k", type=int, default=int(env(prefix + "_TOP_K", str(TOP_K))),
                   help=f"with one beam: sample among the k likeliest tokens (0: all; {TOP_K} as IndexTTS)")
    p.add_argument("--top-p", type=float, default=float(env(prefix + "_TOP_P", str(TOP_P))),
                   help=f"with one beam: ... and among the fewest of them that reach this probability ({TOP_P})")
    p.add_argument("--temperature", type=float, default=float(env(prefix + "_TEMPERATURE", str(TEMPERATURE))),
                   help=f"the logits' temperature, sampling and beam search ({TEMPERATURE} as IndexTTS)")


def decode_settings(opts, name):
    """The Batcher's decoding arguments from add_decode_args' options; a bad value
    stops the host with a message naming it."""
    if opts.top_k < 0 or not 0 < opts.top_p <= 1 or not 0 < opts.temperature < math.inf:
        raise SystemExit(f"{name}: --top-k must not be negative, --top-p must be in (0, 1] and --temperature "
                         f"above 0 (got {opts.top_k}, {opts.top_p}, {opts.temperature})")
    if opts.s2mel_sms < 0:
        raise SystemExit(f"{name}: --s2mel-sms must not be negative (got {opts.s2mel_sms})")
    if not 0 <= opts.s2mel_waste < math.inf:
        raise SystemExit(f"{name}: --s2mel-waste must be a number, 0 or more (got {opts.s2mel_waste})")
    if not 0 <= opts.s2mel_express < math.inf:
        raise SystemExit(f"{name}: --s2mel-express must be a number of seconds, 0 or more (got {opts.s2mel_express})")
    return {"greedy": opts.greedy, "top_k": opts.top_k, "top_p": opts.top_p, "temperature": opts.temperature,
            "decode_graphs": opts.decode_graphs, "paged": opts.paged, "s2mel_sms": opts.s2mel_sms,
            "s2mel_waste": opts.s2mel_waste, "s2mel_rolling": opts.s2mel_rolling,
            "s2mel_express": opts.s2mel_express}


def penalise(logits, seen, penalty):
    """HF's repetition penalty: the logits of tokens already made move towards less
    likely (divided by the penalty when positive, multiplied when negative)."""
    penalised = torch.where(logits < 0, logits * penalty, logits / penalty)
    return torch.where(seen, penalised, logits)


# ---------------------------------------------------------------------------------------
# The paged KV cache


class KVPool:
    """Blocks of KV for every layer: k and v are [layers, blocks, BLOCK, heads, head_dim]
    (a gathered block table reshapes to [rows, tokens, heads, head_dim] without a copy).
    Block 0 is never handed out: padded block-table entries point at it and are masked.

    A line is promised, at admission, the most blocks it can hold at once; available()
    is what is neither held nor promised, so an admitted line never runs short. Blocks
    are reference-counted (beams share them) and never shared between lines, so each
    block has one owner and the pool knows what every line holds."""

    def __init__(self, layers, heads, head_dim, n_blocks, dtype, device):
        if n_blocks < 2:
            raise ValueError(f"the KV cache needs at least 2 blocks, got {n_blocks}")
        self.n_blocks = n_blocks
        self.k = torch.zeros(layers, n_blocks, BLOCK_TOKENS, heads, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        self.refs = [0] * n_blocks
        self.owner = [None] * n_blocks
        self.free = list(range(n_blocks - 1, 0, -1))
        self.promised = {}  # owner -> blocks promised
        self.held = {}  # owner -> blocks held now
        self.peak = {}  # owner -> most blocks held at once

    @staticmethod
    def bytes_per_token(layers, heads, head_dim, dtype):
        return layers * 2 * heads * head_dim * torch.empty((), dtype=dtype).element_size()

    def block_bytes(self):
        return self.k[:, 0].numel() * self.k.element_size() * 2

    def available(self):
        """Blocks neither held nor promised."""
        return len(self.free) - sum(max(0, n - self.held[o]) for o, n in self.promised.items())

    def promise(self, owner, n):
        self.promised[owner] = n
        self.held[owner] = 0
        self.peak[owner] = 0

    def take(self, owner):
        if not self.free:
            raise HostError(OUT_OF_MEMORY, "the KV cache has no free block (a line outgrew its promise)")
        b = self.free.pop()
        self.refs[b] = 1
        self.owner[b] = owner
        self.held[owner] += 1
        self.peak[owner] = max(self.peak[owner], self.held[owner])
        return b

    def share(self, b):
        self.refs[b] += 1

    def drop(self, b):
        self.refs[b] -= 1
        if self.refs[b] == 0:
            self.free.append(b)
            self.held[self.owner[b]] -= 1
            self.owner[b] = None

    def settle(self, owner):
        """Forgets a line whose blocks are all dropped; returns the most it held."""
        self.promised.pop(owner, None)
        self.held.pop(owner, None)
        return self.peak.pop(owner, 0)


class Row:
    """One beam of a sequence: its block table and the tokens in its cache."""

    __slots__ = ("blocks", "length")

    def __init__(self, blocks, length):
        self.blocks = blocks
        self.length = length


# ---------------------------------------------------------------------------------------
# Lines and sequences


@dataclasses.dataclass
class Sequence:
    """One GPT generation: a segment of a line's text."""

    line: "Line"
    index: int
    text_tokens: object  # [1, T] on the device
    limit: int  # mel tokens to make at most
    rows: list = None
    slot: int = 0  # its first row in the Batcher's per-row buffers (its beams follow)
    history: list = None  # per beam, python list of tokens
    made: int = 0
    last: list = None  # the tokens chosen last, one per beam
    need_blocks: int = 0  # the most blocks it can hold at once
    key: int = 0  # its sampling noise's key (sequence_key of its line's seed and its index)
    rows_sum: int = 0
    steps: int = 0
    codes: object = None  # [1, N] when done
    finished: bool = False


@dataclasses.dataclass(eq=False)
class Line:
    """One /synthesize request."""

    req: object
    cond: object = None
    sequences: list = dataclasses.field(default_factory=list)
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    result: dict = None
    error: HostError = None
    submitted: float = 0.0
    started: float = 0.0  # joined the batch
    stages: dict = dataclasses.field(default_factory=dict)
    activation_bytes: int = 0
    s2mel_peak: int = 0  # its share of the most an s2mel step or its vocoder allocated
    s2mel_at: float = 0.0  # joined s2mel
    s2mel_group: int = 0  # the most lines in s2mel's table with it
    frames: int = 0  # s2mel's frames for its longest sequence, prompt and target (its GPT done)
    kv_bytes: int = 0
    event: object = None
    ready_at: float = 0.0  # its GPT finished
    first: bool = False  # an editor's retake: admitted, and in s2mel, ahead of the others
    express: bool = False  # its s2mel runs on the express lane (S2MEL_EXPRESS)

    def fail(self, err):
        if not self.done.is_set():
            self.error = err
            self.done.set()


# ---------------------------------------------------------------------------------------
# The scheduler


class Batcher:
    """The GPT loop (one thread) and the s2mel stage (a thread per S2MelLane), over one adapter."""

    def __init__(self, adapter, meter, max_sequences, beams, kv_cache_bytes, decode_stride=1, s2mel_batch=16,
                 s2mel_max_wait=S2MEL_MAX_WAIT, s2mel_waste=S2MEL_WASTE, s2mel_rolling=S2MEL_ROLLING, s2mel_express=S2MEL_EXPRESS, repetition_penalty=REPETITION_PENALTY,
                 temperature=TEMPERATURE,
                 greedy=False, top_k=TOP_K, top_p=TOP_P, decode_graphs=True, paged=True, s2mel_sms=0):
        self.a = adapter
        self.meter = meter
        self.max_sequences = max_sequences
        self.beams = beams
        # One beam samples (top_k, top_p, temperature) unless greedy; more beams search.
        self.decode = "beam_search" if beams > 1 else ("greedy" if greedy else "sample")
        self.top_k = top_k
        self.top_p = top_p
        self.kv_cache_bytes = kv_cache_bytes
        self.stride = max(1, decode_stride)
        self.s2mel_batch = s2mel_batch
        self.penalty = repetition_penalty
        self.temperature = temperature
        self.inbox = queue.SimpleQueue()  # ("line", Line) | ("call", fn, box, event)
        self.waiting = []  # lines not yet in the batch
        self.active = []  # sequences decoding
        self.ready = []  # lines whose GPT is done, waiting for s2mel (under ready_cv)
        self.ready_cv = threading.Condition()
        self.vocoded = queue.SimpleQueue()  # (lines, wavs, event, launched) for the writer
        self.s2mel_max_wait = s2mel_max_wait
        self.s2mel_waste = s2mel_waste
        self.s2mel_rolling = s2mel_rolling
        self.s2mel_express = s2mel_express
        self.lanes = []  # S2MelLane, one per s2mel thread (start)
        self.lock = threading.Lock()
        # torch's peak of allocated memory is the device's: one s2mel thread measures at a time.
        self.measure_lock = threading.Lock()
        self.stats = {"steps": 0, "batch_rows_max": 0, "in_s2mel": 0, "graph_steps": 0, "graphs_refused": 0,
                      "prefills": 0, "graph_prefills": 0, "s2mel_set_aside": 0}
        # Where the GPT thread's time goes (seconds, summed): whole decode steps, their
        # wait for the device (the one sync of a step), the thread's CPU time in a step
        # outside that wait, and prefills. The rest of a step's time the thread was
        # ready but not running: the GIL held by another thread.
        self.timing = {"step": 0.0, "step_sync": 0.0, "step_cpu": 0.0, "prefill": 0.0}
        # s2mel and the vocoder on a green context of this many SMs (0: all of them,
        # shared with the GPT; start() sets it to 0 where none is made); s2mel_sms_off
        # says why none was made on CUDA when one was asked for.
        self.s2mel_sms = s2mel_sms
        self.s2mel_sms_off = ""
        self.decode_graphs = decode_graphs
        # The decode step's attention reads the pool in place (paged_attention.py) where
        # its kernel can run (start() checks); otherwise it gathers each row's blocks.
        self.paged = paged
        self.paged_off = ""  # why the kernel could not serve, when it was wanted
        self.graphs = None  # GraphCache of _decode per (rows, blocks) bucket, on CUDA
        self.prefill_graphs = None  # GraphCache of _prompt per prompt blocks, on CUDA
        # The graphs' pools (their inputs and the per-row buffers are ordinary
        # allocations, in memory_allocated).
        self.graph_pool_bytes = 0
        self.rate = []  # (time, tokens) of recent steps
        self._sync_cpu = 0.0  # the GPT thread's CPU time in this step's wait

    # -- setup ------------------------------------------------------------------------

    def start(self):
        """Allocates the KV pool and starts both threads; runs on the caller's thread
        (the host's loader) once the adapter has loaded."""
        a = self.a
        per_token = KVPool.bytes_per_token(a.layers, a.heads, a.head_dim, a.kv_dtype)
        n_blocks = max(2, self.kv_cache_bytes // (per_token * BLOCK_TOKENS))
        self.pool = KVPool(a.layers, a.heads, a.head_dim, n_blocks, a.kv_dtype, a.device)
        # How the vocoder's activations run ("fused" or "cuda": one kernel each; "torch":
        # the plain steps) and why not one kernel where that was asked for.
        self.vocoder_kernel, self.vocoder_kernel_off = a.vocoder_kernel()
        self.kv_bytes_per_token = per_token
        self._row_buffers()
        cuda = a.device.type == "cuda"
        # The GPT's many small kernels go first: on a stream of its own at high priority,
        # a decode step's kernels are not queued behind the s2mel group's large ones (on
        # one H200, equal priorities made a 192-row step take about 200 ms).
        self.gpt_stream = torch.cuda.Stream(a.device, priority=-1) if cuda else None
        self.s2mel_stream = torch.cuda.Stream(a.device, priority=0) if cuda else None
        # The vocoder of one group runs on a stream of its own while s2mel goes on with
        # the next group; the writer thread waits for it and writes the WAVs.
        self.vocoder_stream = torch.cuda.Stream(a.device, priority=0) if cuda else None
        if cuda and self.s2mel_sms:
            self._partition()
        elif not cuda:
            self.s2mel_sms = 0  # on the CPU there are no SMs to share: no news
        if self.paged:
            self.paged_off = paged_attention.check(a.device, BLOCK_TOKENS, a.heads, a.head_dim, a.kv_dtype, self.stride) or ""
            self.paged = not self.paged_off
            if self.paged_off and cuda:  # on the CPU gathering is the only way: no news
                print(f"batching: the decode step gathers its KV blocks (paged attention: {self.paged_off})",
                      file=sys.stderr, flush=True)
        if cuda and self.decode_graphs:
            self._capture_graphs()
        self.lanes = [S2MelLane(False, a.s2mel_table(), self.s2mel_stream, self.vocoder_stream)]
        if self.s2mel_express > 0:
            # Its streams go before the first lane's and share the GPT's priority; on the
            # whole device, with --s2mel-sms too.
            streams = [torch.cuda.Stream(a.device, priority=-1) if cuda else None for _ in range(2)]
            self.lanes.append(S2MelLane(True, a.s2mel_table(), *streams))
        threading.Thread(target=self._gpt_loop, name="gpt", daemon=True).start()
        for lane in self.lanes:
            name = "s2mel-express" if lane.express else "s2mel"
            threading.Thread(target=self._s2mel_loop, args=(lane,), name=name, daemon=True).start()
        threading.Thread(target=self._write_loop, name="writer", daemon=True).start()

    def _row_buffers(self):
        """The decode step's per-row state, one buffer each for every row the pool can
        hold, so that rows keep their place from one step to the next and every graph
        reads the same memory: scores [R] (a beam's log-probability), seen [R, vocab]
        (the tokens it made: the repetition penalty) and choice [R, 2] (per row its
        parent beam and its token, the step's one copy to the CPU). Row i*beams + j is
        beam j of the i-th sequence decoding. A sequence is promised at least a prompt
        block and two blocks a beam, and admission keeps the promises within the pool,
        so the sequences decoding never pass row_capacity / beams."""
        b, dev = self.beams, self.a.device
        self.row_capacity = b * ((self.pool.n_blocks - 1) // (1 + 2 * b))
        self.scores = torch.zeros(self.row_capacity, device=dev)
        self.seen = torch.zeros(self.row_capacity, self.a.vocab, dtype=torch.bool, device=dev)
        self.choice = torch.zeros(self.row_capacity, 2, dtype=torch.long, device=dev)

    def _partition(self):
        """Moves s2mel and the vocoder onto streams of a green context of s2mel_sms SMs
        (sm_partition.py): the GPT's decode step then never waits for SMs that s2mel's
        kernels hold. Where none can be made the host says why and shares the SMs."""
        try:
            streams = sm_partition.streams(self.a.device, self.s2mel_sms, 2)
        except RuntimeError as e:
            self.s2mel_sms_off = str(e)
            print(f"batching: s2mel shares every SM with the GPT (--s2mel-sms {self.s2mel_sms}: {e})",
                  file=sys.stderr, flush=True)
            self.s2mel_sms = 0
            return
        self.s2mel_stream, self.vocoder_stream = streams[0], streams[-1]

    def _capture_graphs(self):
        """Records the decode step for every bucket of rows (up to the most a full batch
        holds) and of blocks (up to the model's positions), and the prefill of prompts
        of 1 to PREFILL_GRAPH_TEXT_TOKENS text tokens, before the host serves: no step
        waits for a capture, and the graphs' pools, each sized by its largest graph
        first, are part of the memory the host reports at load."""
        a = self.a
        self.graph_rows, self.graph_widths, keys = decode_buckets(self.max_sequences, self.beams, a.max_positions,
                                                                  self.pool.n_blocks)
        keys = [(r, w) for r, w in keys if r <= self.row_capacity]  # a graph writes all its rows' buffers
        k = self.stride
        torch.cuda.synchronize(a.device)
        empty_cache()
        reserved, allocated = torch.cuda.memory_reserved(a.device), torch.cuda.memory_allocated(a.device)
        with self._stream(self.gpt_stream), torch.inference_mode(), a.gpt_context(), _no_autocast_cache():
            # Every graph writes its choices into the per-row buffers (_row_buffers), not
            # into outputs of its own in the pool. The warm-ups and captures write rows
            # no sequence holds yet: a prefill sets its rows before they are read.
            self.graphs = GraphCache(self._decode, a.device)
            keys.sort(key=lambda rw: -rw[0] * rw[1])  # the largest first: it sizes the pool
            for i, (r, w) in enumerate(keys):
                try:
                    self.graphs.capture((r, w), (torch.zeros(r, 2 * k + 2 + w, dtype=torch.long, device=a.device),))
                except Exception as e:  # noqa: BLE001
                    if not self.meter.is_oom(e):
                        raise
                    # Out of memory: this bucket and the rest run eagerly (the card is
                    # fuller than the KV pool's share assumed); the host still loads.
                    self.stats["graphs_refused"] = len(keys) - i
                    break
            self._capture_prefill_graphs()
            torch.cuda.current_stream(a.device).synchronize()
        # What the graphs hold beyond their allocated inputs: the pool's free-but-kept
        # memory (the warm-up's temporaries on the side stream go back first).
        empty_cache()
        self.graph_pool_bytes = max(0, (torch.cuda.memory_reserved(a.device) - reserved) -
                                    (torch.cuda.memory_allocated(a.device) - allocated))

    def _capture_prefill_graphs(self):
        """One graph of _prompt per prompt of whole blocks, the largest first, into a
        pool of their own (they run between decode steps, on the same stream). A
        prompt's embeddings are what embed_codes makes: their width and type."""
        a = self.a
        most = min(a.max_positions, a.prefix_tokens + PREFILL_GRAPH_TEXT_TOKENS)
        probe = a.embed_codes(torch.zeros(1, 1, dtype=torch.long, device=a.device),
                              torch.zeros(1, 1, dtype=torch.long, device=a.device))
        self.prefill_graphs = GraphCache(self._prompt, a.device)
        for n in range(math.ceil(most / BLOCK_TOKENS), 0, -1):
            x = torch.zeros(1, n * BLOCK_TOKENS, probe.shape[-1], dtype=probe.dtype, device=a.device)
            table = torch.zeros(n, dtype=torch.long, device=a.device)  # block 0: the warm-up writes no line's
            try:
                self.prefill_graphs.capture(n, (x, table, torch.zeros(1, dtype=torch.long, device=a.device)))
            except Exception as e:  # noqa: BLE001
                if not self.meter.is_oom(e):
                    raise
                self.stats["graphs_refused"] += n  # these prompts are run eagerly
                break

    def _stream(self, s):
        return torch.cuda.stream(s) if s is not None else contextlib.nullcontext()

    # -- requests from HTTP threads ----------------------------------------------------

    def submit(self, line):
        line.submitted = time.perf_counter()
        self.inbox.put(("line", line))

    def call(self, fn):
        """Runs fn on the GPT thread between two decode steps (conditioning, caches)."""
        box, done = {}, threading.Event()
        self.inbox.put(("call", fn, box, done))
        while not done.wait(0.2):
            pass
        if "error" in box:
            raise box["error"]
        return box["result"]

    def snapshot(self):
        with self.lock:
            now = time.perf_counter()
            recent = [(t, n) for t, n in self.rate if now - t <= 10]
            rate = sum(n for _, n in recent) / max(now - recent[0][0], 1e-3) if len(recent) > 1 else 0.0
            decoding = self._lines_decoding()
            return {
                "max_sequences": self.max_sequences, "beams": self.beams, "decode": self.decode,
                "block_tokens": BLOCK_TOKENS,
                "kv_bytes_per_token": self.kv_bytes_per_token, "kv_cache_bytes": self.pool.n_blocks *
                self.pool.block_bytes(), "kv_free_bytes": max(0, self.pool.available()) * self.pool.block_bytes(),
                "prefix_tokens": self.a.prefix_tokens, "tokens_per_second": self.a.tokens_per_second,
                "activation_bytes_per_second": self.a.activation_bytes_per_second,
                "decoding": decoding, "waiting": len(self.waiting), "in_s2mel": self.stats["in_s2mel"],
                "decode_tokens_per_second": round(rate, 1), "batch_rows_max": self.stats["batch_rows_max"],
                "steps": self.stats["steps"], "graph_steps": self.stats["graph_steps"],
                "decode_graphs": len(self.graphs) if self.graphs else 0,
                "prefill_graphs": len(self.prefill_graphs) if self.prefill_graphs else 0,
                "graph_capture_seconds": round(sum(c.capture_seconds for c in (self.graphs, self.prefill_graphs)
                                                   if c is not None), 2),
                "graph_pool_bytes": self.graph_pool_bytes, "graphs_refused": self.stats["graphs_refused"],
                "paged_attention": self.paged, "paged_attention_off": self.paged_off,
                "s2mel_sms": self.s2mel_sms, "s2mel_sms_off": self.s2mel_sms_off,
                "s2mel_rolling": self.s2mel_rolling, "s2mel_express": self.s2mel_express, "s2mel_set_aside": self.stats["s2mel_set_aside"],
                "vocoder_kernel": self.vocoder_kernel, "vocoder_kernel_off": self.vocoder_kernel_off,
                "timing": {k: round(v, 4) for k, v in self.timing.items()},
            }

    # -- the GPT loop -------------------------------------------------------------------

    def _gpt_loop(self):
        with self._stream(self.gpt_stream), torch.inference_mode():
            while True:
                self._drain_inbox(block=not self.active and not self.waiting)
                self._admit()
                if not self.active:
                    if self.waiting:
                        time.sleep(0.002)  # blocks are held by lines in s2mel: wait for them
                    continue
                w, c = time.perf_counter(), time.thread_time()
                self._sync_cpu = 0.0
                try:
                    with self.a.gpt_context():
                        self._step()
                except Exception as e:  # noqa: BLE001 (every failure goes back to its lines)
                    self._fail_batch(e)
                self.timing["step"] += time.perf_counter() - w
                self.timing["step_cpu"] += time.thread_time() - c - self._sync_cpu

    def _drain_inbox(self, block):
        while True:
            try:
                item = self.inbox.get(timeout=0.5) if block else self.inbox.get_nowait()
            except queue.Empty:
                return
            block = False
            if item[0] == "line":
                self._enqueue(item[1])
            else:
                _, fn, box, done = item
                try:
                    box["result"] = fn()
                except BaseException as e:  # noqa: BLE001 (handed back to the caller)
                    box["error"] = e
                finally:
                    done.set()

    def _enqueue(self, line):
        """A line joins the waiting lines behind the others, or, first, behind the other
        first lines only: an editor's retake does not wait behind a script's worth of
        queued lines for room in the batch."""
        i = len(self.waiting)
        if line.first:
            i = next((j for j, ln in enumerate(self.waiting) if not ln.first), i)
        self.waiting.insert(i, line)

    def _lines_decoding(self):
        return len({id(s.line) for s in self.active})

    def _admit(self):
        """Moves waiting lines into the batch, in order (first lines ahead: _enqueue),
        while there is room: fewer than max_sequences lines decoding and the KV blocks
        they can ever need free."""
        while self.waiting and self._lines_decoding() < self.max_sequences:
            line = self.waiting[0]
            try:
                if not line.sequences:
                    self._plan(line)
            except HostError as e:
                self.waiting.pop(0)
                line.fail(e)
                continue
            except Exception as e:  # noqa: BLE001
                self.waiting.pop(0)
                line.fail(self._error(e))
                continue
            need = sum(s.need_blocks for s in line.sequences)
            if need > self.pool.n_blocks - 1:
                self.waiting.pop(0)
                line.fail(invalid(f"this line needs {need * self.pool.block_bytes()} bytes of KV cache, the host's "
                                  f"cache holds {(self.pool.n_blocks - 1) * self.pool.block_bytes()}: raise "
                                  f"--kv-cache-bytes or split the line"))
                continue
            if need > self.pool.available():
                return  # FIFO: later lines wait too, so a long line is not starved
            self.waiting.pop(0)
            self.pool.promise(line, need)
            line.started = time.perf_counter()
            line.stages["queue"] = line.started - line.submitted
            t = time.perf_counter()
            try:
                with self.a.gpt_context():
                    for seq in line.sequences:
                        self._prefill(seq)
                        self.active.append(seq)
            except Exception as e:  # noqa: BLE001
                # Its sequences were the last appended: the others keep their rows.
                self.active = [s for s in self.active if s.line is not line]
                self._release_line(line)
                line.fail(self._error(e))
            self.timing["prefill"] += time.perf_counter() - t

    def _plan(self, line):
        t = time.perf_counter()
        line.cond = self.a.conditioning(line.req)
        segments = self.a.segments(line.req)
        line.stages["conditioning"] = time.perf_counter() - t
        for i, (text_tokens, limit, _secs) in enumerate(segments):
            p = self.a.prefix_tokens + text_tokens.shape[1]
            if p + limit + self.stride > self.a.max_positions:
                raise invalid(f"a segment of {p} prompt and {limit} mel tokens passes the model's "
                              f"{self.a.max_positions} positions")
            seq = Sequence(line=line, index=i, text_tokens=text_tokens, limit=limit,
                           key=sequence_key(line.req.seed, i))
            # The prompt once, then each beam's tokens, plus one block per beam for the
            # copy a shared last block needs when a beam takes over another's history.
            seq.need_blocks = (math.ceil(p / BLOCK_TOKENS) +
                               self.beams * (math.ceil((limit + self.stride) / BLOCK_TOKENS) + 1))
            line.sequences.append(seq)

    def _prefill(self, seq):
        """Runs the prompt (conditioning latents and text) through the GPT for one row,
        writes its KV into fresh blocks that every beam shares, and makes the first
        choice of every beam from the logits of its last position."""
        a, pool = self.a, self.pool
        x = a.embed_prefix(seq.line.cond, seq.text_tokens)  # [1, P, D]
        p = x.shape[1]
        n = math.ceil(p / BLOCK_TOKENS)
        blocks = [pool.take(seq.line) for _ in range(n)]
        g = self.prefill_graphs.get(n) if self.prefill_graphs is not None else None
        if g is not None and g.inputs[0].dtype == x.dtype:
            xin, table, last = g.inputs
            xin[:, :p].copy_(x)
            xin[:, p:].zero_()
            table.copy_(torch.tensor(blocks), non_blocking=True)
            last.fill_(p - 1)
            logits = g.replay()
            self.stats["graph_prefills"] += 1
        else:  # the same padding: a prompt gives the same logits either way
            logits = self._prompt(F.pad(x, (0, 0, 0, n * BLOCK_TOKENS - p)), torch.tensor(blocks, device=a.device),
                                  torch.tensor([p - 1], device=a.device))
        self.stats["prefills"] += 1
        for b in blocks:
            for _ in range(self.beams - 1):
                pool.share(b)
        seq.rows = [Row(list(blocks), p) for _ in range(self.beams)]
        seq.history = [[] for _ in range(self.beams)]
        # Its rows follow the batch's (the step after reads every sequence's choice).
        b = self.beams
        seq.slot = i = b * len(self.active)
        self.seen[i:i + b] = False
        self.scores[i] = 0
        self.scores[i + 1:i + b] = -1e9  # every beam starts identical: the first choice fans out from one
        keys = torch.tensor([self._draw_key(seq)], device=a.device) if self.decode == "sample" else None
        self._select(logits.expand(b, -1), i, keys)

    def _prompt(self, x, table, last):
        """A prefill's GPT pass: x [1, P, D] a prompt's embeddings padded to its blocks
        (table [P / BLOCK_TOKENS]), the real ones ending at position last [1]. Writes
        every position's keys and values (a padded position's into its last block, past
        the row's length: masked until a decode step writes there) and returns the
        logits of position last [1, V]. Causal: the padding changes no real position.
        What a prefill graph records."""
        a, pool = self.a, self.pool
        pos = torch.arange(x.shape[1], device=x.device)
        blk, off = table[pos // BLOCK_TOKENS], pos % BLOCK_TOKENS
        for li, layer in enumerate(a.layers_list):
            q, k, v = layer.qkv(x)  # [1, H, P, hd]
            pool.k[li][blk, off] = k[0].transpose(0, 1)
            pool.v[li][blk, off] = v[0].transpose(0, 1)
            x = layer.finish(x, attention(q, k, v, causal=True))
        return a.head(x[0].index_select(0, last))

    def _select(self, logits, start, keys=None):
        """Chooses the next token of every sequence whose rows start..start+R hold
        logits [R, V] (whole sequences, beams rows each), in place on the per-row
        buffers: beam search (its scores, its repetition memory moved to each new
        beam's parent) or, with one beam sampling, a draw keyed by keys [R]. A handful
        of kernels for the whole batch and no sync: the decode graph records it with
        the GPT pass, and the next step reads choice. One beam greedy is the same
        search of one row."""
        b, v, n = self.beams, self.a.vocab, logits.shape[0]
        seen, scores = self.seen[start:start + n], self.scores[start:start + n]
        logits = penalise(logits.float(), seen, self.penalty)
        if self.decode == "sample":
            tok = sample_tokens(logits, keys, self.top_k, self.top_p, self.temperature)
            seen.scatter_(1, tok[:, None], True)
            self.choice[start:start + n].copy_(torch.stack([torch.zeros_like(tok), tok], 1))
            return
        logp = (F.log_softmax(logits / self.temperature, dim=-1) + scores[:, None]).view(n // b, b * v)
        top, idx = logp.topk(2 * b, dim=-1)
        parent = torch.div(idx[:, :b], v, rounding_mode="floor")
        tok = (idx[:, :b] % v).reshape(-1)
        rows = (parent + torch.arange(0, n, b, device=logits.device)[:, None]).reshape(-1)
        new = seen.index_select(0, rows)
        seen.copy_(new.scatter_(1, tok[:, None], True))
        scores.copy_(top[:, :b].reshape(-1))
        self.choice[start:start + n].copy_(torch.stack([parent.reshape(-1), tok], 1))

    @staticmethod
    def _draw_key(s):
        """The noise key of sequence s's next draw: its key and the tokens it has made."""
        return hash32(s.key ^ (s.made & MASK32))

    def _to_host(self, t):
        """t on the CPU: a decode step's one wait for the device, timed."""
        w, c = time.perf_counter(), time.thread_time()
        out = t.cpu()
        self.timing["step_sync"] += time.perf_counter() - w
        self._sync_cpu += time.thread_time() - c
        return out

    def _step(self):
        """One decode step of the whole batch: read every sequence's choice (made by the
        step before, or its prefill), retire the sequences that are done, feed the rest
        and choose their next tokens."""
        a, pool, b = self.a, self.pool, self.beams
        seqs = self.active
        chosen = self._to_host(self.choice[:b * len(seqs)]).view(len(seqs), b, 2).tolist()
        feed = []
        for s, rows in zip(seqs, chosen):
            par, tk = [r[0] for r in rows], [r[1] for r in rows]
            k = min(self.stride, s.limit - s.made)
            s.history = [s.history[p] + [t] * k for p, t in zip(par, tk)]
            self._reorder(s, par)
            s.made += k
            s.last = tk
            stop = a.stop_token is not None and all(t == a.stop_token for t in tk)
            if s.made >= s.limit or stop:
                self._finish(s)
            else:
                feed.append(s)
        self.active = feed
        if not feed:
            return
        self._compact(feed)
        k = self.stride
        rows = [r for s in feed for r in s.rows]
        n = len(rows)
        # Room for this step's k tokens in every row: a new block at a block boundary,
        # a private copy of a last block that other rows share (copy on write).
        copies = [], []
        for s in feed:
            for r in s.rows:
                for p in range(r.length, r.length + k):
                    bi = p // BLOCK_TOKENS
                    if bi == len(r.blocks):
                        r.blocks.append(pool.take(s.line))
                    elif pool.refs[r.blocks[bi]] > 1:
                        nb = pool.take(s.line)
                        copies[0].append(r.blocks[bi])
                        copies[1].append(nb)
                        pool.drop(r.blocks[bi])
                        r.blocks[bi] = nb
        if copies[0]:
            src, dst = torch.tensor(copies, device=a.device)
            pool.k[:, dst] = pool.k[:, src]
            pool.v[:, dst] = pool.v[:, src]
        width = max(len(r.blocks) for r in rows)
        key, g = self._decode_graph(n, width)
        n_pad, width = key if g is not None else (n, width)
        # One int64 tensor per step, one copy to the device: per row its k tokens,
        # their k mel positions, its cache length, its noise key and its block table
        # (_forward's layout).
        ids = []
        for s in feed:
            pos = list(range(s.made - k, s.made))
            nk = self._draw_key(s) if self.decode == "sample" else 0
            for r, t in zip(s.rows, s.last):
                ids.append([t] * k + pos + [r.length, nk] + r.blocks + [0] * (width - len(r.blocks)))
        ids.extend([[0] * (2 * k + 2 + width)] * (n_pad - n))  # padded rows: block 0, masked
        ids = torch.tensor(ids, dtype=torch.long)
        if g is not None:
            g.inputs[0].copy_(ids, non_blocking=True)
            g.replay()
            self.stats["graph_steps"] += 1
        else:
            self._decode(ids.to(a.device, non_blocking=True))
        for s in feed:
            for r in s.rows:
                r.length += k
            s.rows_sum += n
            s.steps += 1
        with self.lock:
            self.stats["steps"] += 1
            self.stats["batch_rows_max"] = max(self.stats["batch_rows_max"], n)
            self.rate.append((time.perf_counter(), k * len(feed)))
            if len(self.rate) > 512:
                del self.rate[:256]

    def _compact(self, feed):
        """Moves the rows of the sequences fed this step to the front, in order, where
        one before them retired: rows i*beams... are the i-th sequence's."""
        b = self.beams
        if all(s.slot == i * b for i, s in enumerate(feed)):
            return
        keep = torch.tensor([s.slot + j for s in feed for j in range(b)], device=self.a.device)
        m = keep.shape[0]
        self.seen[:m] = self.seen.index_select(0, keep)
        self.scores[:m] = self.scores.index_select(0, keep)
        for i, s in enumerate(feed):
            s.slot = i * b

    def _decode(self, ids):
        """A decode step on the device: the GPT pass of ids (_forward) and the next
        choice of every row (_select, keyed by ids' key column when sampling). What a
        decode graph records."""
        self._select(self._forward(ids), 0, ids[:, 2 * self.stride + 1])

    def _forward(self, ids):
        """One decode step's GPT pass: ids [R, 2k + 2 + W] holds per row its k tokens,
        their k mel positions, its cache length, its noise key (for _select) and its
        block table of W blocks (block 0 pads it, masked). Writes the k tokens' keys and values into the pool and
        returns the logits of each row's last token [R, V]. Only tensor work on the
        device: a CUDA graph records it as it is."""
        a, pool, k = self.a, self.pool, self.stride
        n = ids.shape[0]
        tokens, mel_pos = ids[:, :k], ids[:, k:2 * k]
        lengths, table = ids[:, 2 * k], ids[:, 2 * k + 2:]
        width = table.shape[1]
        pos = lengths[:, None] + torch.arange(k, device=ids.device)  # cache positions
        wblk = table.gather(1, pos // BLOCK_TOKENS).reshape(-1)
        woff = (pos % BLOCK_TOKENS).reshape(-1)
        if not self.paged:
            keys = torch.arange(width * BLOCK_TOKENS, device=ids.device)
            mask = (keys[None, None, :] <= pos[:, :, None])[:, None]  # [R, 1, k, S]
        x = a.embed_codes(tokens, mel_pos)  # [R, k, D]
        for li, layer in enumerate(a.layers_list):
            q, kk, vv = layer.qkv(x)  # [R, H, k, hd]
            pool.k[li][wblk, woff] = kk.transpose(1, 2).reshape(n * k, a.heads, a.head_dim)
            pool.v[li][wblk, woff] = vv.transpose(1, 2).reshape(n * k, a.heads, a.head_dim)
            if self.paged:
                x = layer.finish(x, paged_attention.decode(q, pool.k[li], pool.v[li], table, lengths))
                continue
            # One gather per tensor; the reshape is a view, the transpose a stride change.
            kc = pool.k[li][table].view(n, width * BLOCK_TOKENS, a.heads, a.head_dim).transpose(1, 2)
            vc = pool.v[li][table].view(n, width * BLOCK_TOKENS, a.heads, a.head_dim).transpose(1, 2)
            x = layer.finish(x, attention(q, kc, vc, mask=mask))
        return a.head(x[:, -1])

    def _decode_graph(self, rows, width):
        """The decode graph for a step of rows rows and width blocks and its key, (rows,
        width) rounded up to their buckets; (None, None) where none was captured (the
        step runs eagerly)."""
        if self.graphs is None:
            return None, None
        key = (bucket_up(rows, self.graph_rows), bucket_up(width, self.graph_widths))
        return key, self.graphs.get(key)

    def _reorder(self, s, parents):
        """New beam j continues parent beam parents[j]: it shares the parent's blocks."""
        if parents == list(range(self.beams)):
            return
        old = s.rows
        new = []
        for p in parents:
            src = old[p]
            for b in src.blocks:
                self.pool.share(b)
            new.append(Row(list(src.blocks), src.length))
        for r in old:
            for b in r.blocks:
                self.pool.drop(b)
        s.rows = new

    def _finish(self, s):
        """A sequence is done: its best beam's tokens are the codes; its blocks go back."""
        a = self.a
        s.codes = torch.tensor([s.history[0]], device=a.device)
        s.finished = True
        for r in s.rows:
            for b in r.blocks:
                self.pool.drop(b)
        s.rows = []
        line = s.line
        if all(q.finished for q in line.sequences):
            self._release_line(line)
            line.stages["gpt"] = time.perf_counter() - line.started
            line.frames = max(a.s2mel_frames(line.cond, q.history[0]) for q in line.sequences)
            seconds = sum(len(q.history[0]) for q in line.sequences) / a.tokens_per_second
            line.express = self.s2mel_express > 0 and (line.first or seconds <= self.s2mel_express)
            if self.gpt_stream is not None:
                line.event = torch.cuda.Event()
                line.event.record(self.gpt_stream)
            with self.lock:
                self.stats["in_s2mel"] += 1
            line.ready_at = time.perf_counter()
            with self.ready_cv:
                self.ready.append(line)
                self.ready_cv.notify_all()

    def _release_line(self, line):
        """Gives back every block the line's sequences hold and what is left of its
        promise; records the most KV it held."""
        for seq in line.sequences:
            for r in seq.rows or []:
                for b in r.blocks:
                    self.pool.drop(b)
            seq.rows = []
        line.kv_bytes = self.pool.settle(line) * self.pool.block_bytes()

    def _error(self, e):
        # Out-of-memory errors are counted once, per request, in the host's counters.
        return protocol.host_error(e, self.meter)

    def _fail_batch(self, e):
        """A step failed (an OOM most likely): the lines decoding now fail with it and
        give their blocks back; waiting lines and lines in s2mel are untouched."""
        err = self._error(e)
        lines = {id(s.line): s.line for s in self.active}
        self.active = []
        for line in lines.values():
            self._release_line(line)
            line.fail(err)
        if self.a.device.type == "cuda":
            empty_cache()

    # -- the s2mel stage ----------------------------------------------------------------

    def _s2mel_loop(self, lane):
        """s2mel's table (S2MelTable) of lane's lines, one step at a time. A group
        (group_of) fills the empty table; with s2mel_rolling, lines join it at its next
        step, whatever the steps of the rows in it (joiners: while it holds fewer than s2mel_batch lines,
        within s2mel_waste of their frames, and no line waits that does not fit): a
        line whose GPT ends while lines of its length are in s2mel waits one step, not
        for their group's end. Without, the group runs its steps through first.

        A first line (an editor's retake) that gets ready while no first line is in
        the table sets the rows in it aside (S2MelTable.set_aside: each keeps its x and
        its steps) and leads the next group; the rows set aside are seated again, where
        they left off, once no first line waits or runs.

        With an express lane (s2mel_express) its thread does the same for the short
        lines and the first ones, on streams of their own, and first lines set nothing
        aside in the other lane."""
        table = lane.table
        rows = []  # S2MelRow seated, in order of joining
        aside = []  # S2MelRow set aside while first lines run
        with self._stream(lane.stream), torch.inference_mode():
            while True:
                group, leaving = None, []
                with self.ready_cv:
                    while not (mine := [ln for ln in self.ready if ln.express == lane.express]) and not rows and not aside:
                        self.ready_cv.wait()
                    first = any(ln.first for ln in mine)
                    if first and rows and not any(r.line.first for r in rows):
                        leaving, rows = rows, []
                    elif not first and aside and not rows:
                        rows, aside = aside, []
                    room = self.s2mel_batch - len({id(r.line) for r in rows})
                    if mine and room > 0 and not rows:
                        group = group_of(mine, time.perf_counter(), room, self.s2mel_max_wait, self.s2mel_waste)
                    elif mine and room > 0 and self.s2mel_rolling:
                        # While rows are set aside only first lines join, so that the
                        # table drains and they are seated again.
                        waiting = [ln for ln in mine if ln.first] if aside else mine
                        group = joiners(waiting, [r.line for r in rows], room, self.s2mel_waste) or None
                    if group is not None:
                        take(self.ready, group)
                if leaving:
                    table.set_aside(leaving)
                    aside += leaving
                    with self.lock:
                        self.stats["s2mel_set_aside"] += 1
                if group is not None:
                    rows += self._join(table, group)
                    if not rows:
                        continue
                lines = {id(r.line): r.line for r in rows}
                try:
                    peak = self._measure(lambda: table.step(rows)) + table.graph_bytes
                except Exception as e:  # noqa: BLE001
                    table.reset()
                    self._fail_group(list(lines.values()), e)
                    rows = []
                    continue
                total = max(1, sum(r.frames for r in rows))
                for r in rows:  # a line's share of the step's memory, by its frames
                    r.line.s2mel_peak = max(r.line.s2mel_peak, int(peak * r.frames / total))
                    r.line.s2mel_group = max(r.line.s2mel_group, len(lines))
                done = [r for r in rows if r.done == table.steps]
                if done:
                    rows = [r for r in rows if r.done < table.steps]
                    self._end(lane, done)

    def _measure(self, fn):
        """Runs fn; returns what it allocated at most beyond what was there (0 on the CPU)."""
        if self.a.device.type != "cuda":
            fn()
            return 0
        with self.measure_lock:
            before = torch.cuda.memory_allocated(self.a.device)
            torch.cuda.reset_peak_memory_stats(self.a.device)
            fn()
            return max(0, torch.cuda.max_memory_allocated(self.a.device) - before)

    def _join(self, table, lines):
        """Lines' rows for the table (their latents, the adapter's row inputs with their
        noise drawn): the rows, none of a line where that failed (its lines fail with the
        error). The memory the rows hold counts in their lines' share."""
        a = self.a
        joined = time.perf_counter()
        for line in lines:  # from its GPT's end to its joining the table
            line.stages["s2mel_wait"] = max(0.0, joined - line.ready_at)
            line.s2mel_at = joined
        try:
            for line in lines:
                if getattr(line, "event", None) is not None:
                    torch.cuda.current_stream().wait_event(line.event)
            seqs = [s for line in lines for s in line.sequences]
            out = []

            def rows():
                latents = a.latents_batch([(s.line.cond, s.text_tokens, s.codes) for s in seqs])
                data = table.rows([(s.line.cond, lat, s.codes, s.line.req.seed + s.index)
                                   for s, lat in zip(seqs, latents)])
                out.extend(S2MelRow(s.line, d, d.frames) for s, d in zip(seqs, data))

            held = self._measure(rows)
            frames = max(1, sum(r.frames for r in out))
            for r in out:  # what its rows hold
                r.line.activation_bytes += int(held * r.frames / frames)
            return out
        except Exception as e:  # noqa: BLE001
            self._fail_group(lines, e)
            return []

    def _end(self, lane, rows):
        """Rows' last step is launched: each line's mels (its rows', one per sequence: a
        line's sequences join together and so leave together), their vocoder launched
        on lane's vocoder stream in batches of lines of about one length, the shortest
        first (vocoder_batches), each batch handed to the writer thread while this
        thread goes on with the next step. A line's memory is what its rows hold (at
        joining) and its share, by frames, of the most a step or its vocoder batch
        allocated beyond that."""
        lines = list({id(r.line): r.line for r in rows}.values())
        try:
            mels = {id(r): lane.table.mel_of(r) for r in rows}
            if lane.stream is not None:
                lane.stream.synchronize()
            now = time.perf_counter()
            per_line = []
            for line in lines:
                per_line.append([mels[id(r)] for r in rows if r.line is line])
                line.stages["s2mel"] = now - line.s2mel_at
            frames = [max(m.shape[-1] for m in ms) for ms in per_line]
            launches = []
            for batch in vocoder_batches(frames, self.s2mel_batch):
                launched = time.perf_counter()
                out = []
                # The allocator counts a tensor when its kernel is launched, not when it
                # runs: the vocoder's memory is in the peak although it may still run.
                peak = self._measure(lambda b=batch: out.append(self._vocode(lane, [m for j in b for m in per_line[j]])))
                size = max(1, sum(frames[j] for j in batch))
                for j in batch:
                    lines[j].s2mel_peak = max(lines[j].s2mel_peak, int(peak * frames[j] / size))
                launches.append(([lines[j] for j in batch], *out[0], launched))
            for line in lines:
                line.activation_bytes += line.s2mel_peak
            for item in launches:
                self.vocoded.put(item)
        except Exception as e:  # noqa: BLE001
            self._fail_group(lines, e)

    def _fail_group(self, lines, e):
        """An s2mel group failed (an OOM most likely): its lines fail with the error,
        retryable where it is one; the other groups go on."""
        err = self._error(e)
        for line in lines:
            line.fail(err)
        if self.a.device.type == "cuda":
            empty_cache()
        with self.lock:
            self.stats["in_s2mel"] -= len(lines)

    def _vocode(self, lane, mels):
        """The vocoder over a group's mels, on lane's vocoder stream where there is one:
        returns the waveforms and an event that marks them done (None on the CPU, where
        they are done on return)."""
        stream = lane.vocoder_stream
        if stream is None:
            return self.a.vocoder_batch(mels), None
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for m in mels:  # read on this stream: their memory is not reused before it has
                m.record_stream(stream)
            wavs = self.a.vocoder_batch(mels)
            done = torch.cuda.Event()
            done.record()
        return wavs, done

    def _write_loop(self):
        with torch.inference_mode():
            while True:
                lines, wavs, done, launched = self.vocoded.get()
                try:
                    if done is not None:
                        done.synchronize()
                    t_voc = time.perf_counter() - launched
                    i = 0
                    for line in lines:
                        n = len(line.sequences)
                        line.stages["vocoder"] = t_voc
                        self._write(line, wavs[i:i + n])
                        i += n
                except Exception as e:  # noqa: BLE001
                    err = self._error(e)
                    for line in lines:
                        line.fail(err)  # those written are done already
                    if self.a.device.type == "cuda":
                        empty_cache()
                finally:
                    del wavs
                    with self.lock:
                        self.stats["in_s2mel"] -= len(lines)

    def _write(self, line, wavs):
        a = self.a
        gap = torch.zeros(int(a.sample_rate * 0.2), dtype=torch.int16)
        parts = []
        for i, w in enumerate(wavs):
            if i:
                parts.append(gap)
            parts.append((w.squeeze().float().clamp(-1, 1) * 32767).to(torch.int16).cpu())
        audio = torch.cat(parts)
        out = line.req.output_path
        if os.path.dirname(out):
            os.makedirs(os.path.dirname(out), exist_ok=True)
        with wave.open(out, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(a.sample_rate)
            w.writeframes(audio.numpy().tobytes())
        seqs = line.sequences
        rows = sum(s.rows_sum for s in seqs)
        steps = sum(s.steps for s in seqs)
        line.result = {
            "engine": a.engine, "model_version": a.version, "output_path": out,
            "tokens": sum(s.codes.shape[1] for s in seqs),
            "sequence": {
                "kv_bytes": line.kv_bytes, "activation_bytes": line.activation_bytes,
                "queue_seconds": line.stages.get("queue", 0.0), "gpt_seconds": line.stages.get("gpt", 0.0),
                "s2mel_wait_seconds": line.stages.get("s2mel_wait", 0.0),
                "s2mel_seconds": line.stages.get("s2mel", 0.0), "vocoder_seconds": line.stages.get("vocoder", 0.0),
                "batch_rows_mean": round(rows / steps, 1) if steps else 0.0, "s2mel_group": line.s2mel_group,
                "s2mel_express": line.express,
            },
            "stages": dict(line.stages),
            "duration_factor": line.req.duration_factor or 1.0,
        }
        if a.return_codes:
            line.result["codes"] = [s.codes[0].tolist() for s in seqs]
        line.done.set()


def group_of(ready, now, size, max_wait, waste=S2MEL_WASTE):
    """The next s2mel group of ready (lines whose GPT is done), left in ready.

    The group is led by the line that has waited longest once any has waited max_wait
    seconds, otherwise by the line of fewest frames (its s2mel's, the reference's
    prompt with its own: what its flow-matching steps cost): short lines are not held
    behind a queue of long ones (the latency of a short line is what an editor waits
    for), and no line waits much longer than max_wait behind a stream of short ones.
    The leader takes up to size - 1 companions nearest it in frames: the longest of a
    group at most 1 + waste times its shortest, since a padded frame costs what a real
    one does. A line's frames include its prompt, so lines of different lengths with
    one reference group together: on an H200 a line's share of a group of 16 cost a
    quarter of a group of one.

    Before all that, a first line (an editor's retake) leads, the one ready longest,
    with only first lines as companions: a group's steps take longer the more lines it
    holds, and first lines are few."""
    first = [ln for ln in ready if ln.first]
    overdue = [ln for ln in ready if now - ln.ready_at >= max_wait]
    if first:
        lead = min(first, key=lambda ln: ln.ready_at)
    elif overdue:
        lead = min(overdue, key=lambda ln: ln.ready_at)
    else:
        lead = min(ready, key=lambda ln: ln.frames)
    group, lo, hi = [lead], lead.frames, lead.frames
    others = sorted((ln for ln in (first or ready) if ln is not lead),
                    key=lambda ln: (abs(ln.frames - lead.frames), ln.ready_at))
    for ln in others:
        if len(group) == size:
            break
        a, b = min(lo, ln.frames), max(hi, ln.frames)
        if b <= (1 + waste) * max(a, 1):
            group.append(ln)
            lo, hi = a, b
    return group


def joiners(ready, seated, room, waste=S2MEL_WASTE):
    """The lines of ready that join s2mel's table at its next step (s2mel_rolling),
    seated the lines in it: up to room of them, the fewest frames first, if the lines
    waiting fit with those seated, the longest at most 1 + waste times the shortest;
    none where they do not, so that the table drains and that line leads
    the next group (group_of) instead of waiting behind a stream of lines that fit.
    While a first line waits, only first lines are the lines waiting: the others
    join no more, so that the table drains the sooner where the first do not fit."""
    waiting = [ln for ln in ready if ln.first] or ready
    frames = [ln.frames for ln in seated] + [ln.frames for ln in waiting]
    if max(frames) > (1 + waste) * max(min(frames), 1):
        return []
    return sorted(waiting, key=lambda ln: (ln.frames, ln.ready_at))[:room]


def take(ready, group):
    """Removes group's lines from ready."""
    taken = {id(ln) for ln in group}
    ready[:] = [ln for ln in ready if id(ln) not in taken]


@dataclasses.dataclass(eq=False)
class S2MelLane:
    """One s2mel thread's part (Batcher._s2mel_loop): the lines it takes (the express
    lane's: lines of at most s2mel_express seconds and first lines; the other's: the
    rest), its table, and its streams for s2mel and the vocoder (None on the CPU)."""

    express: bool
    table: object
    stream: object = None
    vocoder_stream: object = None


@dataclasses.dataclass(eq=False)
class S2MelRow:
    """One sequence in s2mel: its line, the adapter's tensors for it (S2MelTable's
    row: its noise x, then x between two seatings, and its conditioning), its frames
    (prompt and target) and the flow-matching steps it has had."""

    line: object
    data: object
    frames: int
    done: int = 0


class S2MelTable:
    """s2mel's flow-matching steps over a table of rows, each row a sequence at its own
    step: a sequence joins at the next step and leaves after its last, whatever the
    others' steps (continuous batching, as the GPT's). The rows are padded to a bucket
    of rows (ROWS: a padded row costs what a real one does) and of frames (a multiple of
    FRAME_STEP); a row keeps its slot while the bucket holds, and a bucket that changes
    seats every row again. Each slot's step is an index on the device (idx, STEPS for
    an empty slot: its time step 0) that the step itself advances, so that a step, as a
    CUDA graph (graphs), is one replay and nothing copied to the device.

    An adapter's table (a subclass, its s2mel_table) gives the model's part: rows
    (each sequence's tensors, its noise drawn from its seed), blank (the inputs of b
    empty slots of t frames: x first), put (a row into a slot), clear (a slot emptied),
    x_of (a row's x out of its slot), flow (one Euler step of every slot, from time t
    by dt, [b] each: tensor work only) and mel (a row's target mel out of its x). With
    graphs the inputs are views of buffers kept here: a graph per bucket reads them,
    and holds no tensors of its own; buffers too small for a new bucket are replaced
    and the graphs that read the old ones dropped."""

    FRAME_STEP = 128
    ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
    MOST_FRAMES = 4096  # an 8 s prompt and a 30 s line: 3,270

    def __init__(self, steps, device, graphs=False, most_rows=16):
        self.steps = steps
        self.device = device
        ts = torch.linspace(0, 1, steps + 1, device=device)
        zero = torch.zeros(1, device=device)
        # Step i's time and its length; an empty slot (index steps) stays where it is.
        self.t_at = torch.cat([ts[:-1], zero])
        self.dt_at = torch.cat([ts[1:] - ts[:-1], zero])
        self.graphs = GraphCache(self._step, device) if graphs else None
        self.most_rows = self._bucket(most_rows)  # the first buffers' room
        self.buffers = []
        self.key = None  # the bucket seated: (rows, frames)
        self.inputs = None  # (x, *conditioning, idx)
        self.graph = None  # the bucket's graph, with graphs
        self.graph_bytes = 0  # its temporaries' memory (0 where its capture ran them for real)
        self.slots = {}  # S2MelRow -> its slot (the row itself: an id may be reused once it is gone)

    # -- the model's part ------------------------------------------------------------

    def rows(self, items):
        """items: (conditioning, latent, codes, seed) -> per item its row's tensors, with
        x (its seeded noise) and frames (prompt and target) among them."""
        raise NotImplementedError

    def blank(self, b, t):
        raise NotImplementedError

    def put(self, inputs, i, row):
        raise NotImplementedError

    def clear(self, inputs, i):
        raise NotImplementedError

    def x_of(self, inputs, i, row):
        raise NotImplementedError

    def flow(self, inputs, t, dt):
        raise NotImplementedError

    def mel(self, x, row):
        """row's target mel [1, 80, F] out of its x (x_of)."""
        raise NotImplementedError

    # -- the table --------------------------------------------------------------------

    def _bucket(self, n):
        return bucket_up(n, self.ROWS) or n

    def shape(self, rows, frames):
        """The bucket (rows, frames) rows of at most frames frames are seated in."""
        return self._bucket(rows), -(-frames // self.FRAME_STEP) * self.FRAME_STEP

    def _step(self, *inputs):
        *model, idx = inputs
        x = model[0].copy_(self.flow(tuple(model), self.t_at[idx], self.dt_at[idx]))
        idx.add_((idx < self.steps).long())
        return x

    def step(self, rows):
        """One flow-matching step of every row of rows, each at its own (row.done, which
        this advances): rows not seated before join, rows seated before and not in rows
        leave (their slots emptied)."""
        self._seat(rows)
        if self.graph is not None:
            self.graph.replay()
        else:
            self._step(*self.inputs)
        for r in rows:
            r.done += 1

    def mel_of(self, row):
        """row's target mel, after its last step (a copy, on the current stream: its
        slot may take another row at the next step)."""
        return self.mel(self.x_of(self.inputs[:-1], self.slots[row], row.data), row.data)

    def run(self, rows):
        """Every step of rows seated alone (a group through at once): their mels."""
        self.reset()
        while any(r.done < self.steps for r in rows):
            self.step(rows)
        return [self.mel_of(r) for r in rows]

    def set_aside(self, rows):
        """Takes rows out of the table, each keeping its x (in its data) and its steps,
        to be seated again later where it left off (a first line's group runs between):
        the table seats nothing after."""
        if self.inputs is not None:
            for r in rows:
                if r in self.slots:
                    r.data.x = self.x_of(self.inputs[:-1], self.slots[r], r.data)
        self.reset()

    def reset(self):
        """Seats nothing: the next step seats its rows anew (after a failed step)."""
        self.key = self.inputs = self.graph = None
        self.slots = {}

    def _seat(self, rows):
        key = self.shape(len(rows), max(r.frames for r in rows))
        if key == self.key:
            staying = set(rows)
            for r in [r for r in self.slots if r not in staying]:
                i = self.slots.pop(r)
                self.clear(self.inputs[:-1], i)
                self.inputs[-1][i] = self.steps
            used = set(self.slots.values())
            room = (i for i in range(key[0]) if i not in used)
            for r in rows:
                if r not in self.slots:
                    self._put(next(room), r)
            return
        if self.inputs is not None:  # every row staying keeps its x
            for r in rows:
                if r in self.slots:
                    r.data.x = self.x_of(self.inputs[:-1], self.slots[r], r.data)
        b, t = key
        inputs = (*self.blank(b, t), torch.full((b,), self.steps, dtype=torch.long, device=self.device))
        self.key, self.graph, self.graph_bytes = key, None, 0
        if self.graphs is not None:
            self.graph, captured = self._graph(key, inputs)
            for v, src in zip(self.graph.inputs, inputs):  # after a capture too: its warm-up wrote x
                v.copy_(src)
            inputs = self.graph.inputs
            # A bucket that captured its graph allocated its temporaries for real, in the
            # peak the batcher measures; later seatings replay in memory the graph holds.
            self.graph_bytes = 0 if captured else self.graph.bytes
        self.inputs = inputs
        self.slots = {}
        for i, r in enumerate(rows):
            self._put(i, r)

    def _put(self, i, r):
        self.put(self.inputs[:-1], i, r.data)
        self.inputs[-1][i] = r.done
        self.slots[r] = i

    def _views(self, inputs):
        """Views of the buffers shaped as inputs; None when a buffer is too small."""
        if len(self.buffers) != len(inputs):
            return None
        views = []
        for buf, x in zip(self.buffers, inputs):
            if buf.numel() < x.numel() or buf.dtype != x.dtype:
                return None
            views.append(buf[:x.numel()].view(x.shape))
        return views

    def _graph(self, key, inputs):
        """The graph of bucket key, captured on inputs' shapes where there is none:
        (graph, whether it was captured now)."""
        g = self.graphs.get(key)
        if g is not None:
            return g, False
        views = self._views(inputs)
        if views is None:  # new buffers: every graph so far reads the old ones
            self.graphs.reset()
            b, t = key
            # Room for the largest bucket of rows, at MOST_FRAMES frames or twice these.
            grow = max(self.most_rows, b) / b * max(2.0, self.MOST_FRAMES / t)
            self.buffers = [torch.empty(math.ceil(x.numel() * grow), dtype=x.dtype, device=self.device)
                            for x in inputs]
            views = self._views(inputs)
        for v, src in zip(views, inputs):  # the warm-up step runs on real inputs
            v.copy_(src)
        # On the caller's stream where it has one of its own (the s2mel thread's): where
        # that is on a green context (--s2mel-sms) the graph's kernels are too. A
        # graph cannot be captured on the default stream: there, the side stream.
        cur = torch.cuda.current_stream(self.device)
        own = cur if cur != torch.cuda.default_stream(self.device) else None
        # A step for real first, every time: a bucket is captured while serving, on shapes
        # not seen before, where a compiled flow (--s2mel-compile) compiles again.
        return self.graphs.capture(key, views, stream=own, warm=True), True


def vocoder_batches(frames, size, waste=VOCODER_WASTE):
    """Splits an s2mel group's lines (frames[i]: line i's longest mel) into the batches
    the vocoder runs, as lists of indices: the shortest first, each at most size lines,
    its longest at most 1 + waste times its shortest (a batch is padded to its longest,
    and the vocoder gains little from a batch: VOCODER_WASTE)."""
    batches = []
    for i in sorted(range(len(frames)), key=lambda i: frames[i]):
        if batches and len(batches[-1]) < size and frames[i] <= (1 + waste) * max(frames[batches[-1][0]], 1):
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


# ---------------------------------------------------------------------------------------
# The host


class BatchingHost(protocol.Host):
    """Protocol logic for a batching host, independent of HTTP (protocol.make_server
    serves it as it serves protocol.ModelHost)."""

    def __init__(self, adapter, batcher_args, meter=None):
        super().__init__(meter)
        self.adapter = adapter
        self.batcher_args = batcher_args

    def load(self):
        use_expandable_segments()
        # The batcher's two threads launch kernels under the GIL: the process hands it
        # over every 0.2 ms instead of every 5 ms, so that one thread's launches do not
        # stall the other's GPU work. Set here, by the host process, not by the Batcher.
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.adapter.load()
        args = dict(self.batcher_args)
        if not args.get("kv_cache_bytes"):
            args["kv_cache_bytes"] = self.adapter.default_kv_cache_bytes()
        self.batcher = Batcher(self.adapter, self.meter, **args)
        self.batcher.start()
        self.meter.synchronize()
        # The decode graphs' pool is held for good though nothing in it is allocated
        # between steps: it counts as resident.
        self.resident = self.meter.allocated() + self.batcher.graph_pool_bytes
        self.loaded = True

    def health(self):
        if not self.loaded:
            raise HostError(UNAVAILABLE, "loading model")
        info = dict(self.adapter.info())
        batch = self.batcher.snapshot()
        with self.state_lock:
            info.update(protocol=PROTOCOL_VERSION, resident_bytes=self.resident, reserved_bytes=self.meter.reserved(),
                        concurrency=self.batcher.max_sequences, busy=batch["decoding"] + batch["in_s2mel"],
                        queued=batch["waiting"], counters=dict(self.counters), batch=batch)
        return info

    def _run(self, fn, body):
        return fn(body)  # on the HTTP thread: the model work is handed to the batcher

    def _on_gpt(self, fn):
        try:
            return self.batcher.call(fn)
        except Exception as e:  # noqa: BLE001 (every failure becomes a protocol error)
            err = protocol.host_error(e, self.meter)
            if err is e:
                raise
            raise err from None

    def _prepare(self, body):
        return self._counted_prepare(lambda b: self._on_gpt(lambda: self.adapter.prepare(b)), body)

    def _synthesize(self, body):
        req = protocol.parse_synthesis(body)
        self.adapter.check(req)
        self.count("requests")
        start = time.perf_counter()
        line = Line(req=req, first=req.first)
        self.batcher.submit(line)
        while not line.done.wait(0.2):
            pass
        if line.error is not None:
            raise line.error
        res = line.result
        res["peak_allocated_bytes"] = line.kv_bytes + line.activation_bytes
        res["peak_reserved_bytes"] = self.meter.reserved()
        return protocol.read_output(res, start)

    def _release(self, _body):
        def release():
            with CAPTURE_LOCK:
                return self.meter.release_cache()
        return self._on_gpt(release)
