#!/usr/bin/env python3
"""The batching host in-process on one GPU, on the film workload of bench/gpucompare
(testdata/film_cues.tsv: consecutive cues of one speaker merged up to 25 s, 150 lines
from the 373rd turn, three characters in turn), against the one-request host.

    python3 bench/gpu/batch_bench.py --stride 4 --concurrency 1,8,32,64 --out DIR

For each concurrency C it sends the workload with at most C lines in flight and
reports audio seconds per wall second, p50/p95 latency, p95 of lines up to 5 s, peak
memory (the allocator's, and NVML's for the process), the stage split and the batch
rows reached. --baseline N first renders the first N lines one at a time on the
one-request host (BenchBackend, as a version-1 host does). --divergence renders one
line alone and inside a full batch in the production precision and reports the
tokens that match and the audio difference. Results go to DIR/batch.json. This is a
measurement of the Python host alone; bench/gpucompare measures it through the
worker's executor.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import wave

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tts", "hosts"))

import bench_host  # noqa: E402
import protocol  # noqa: E402
import torch  # noqa: E402


def workload(path, from_turn=372, count=150, max_gap=300, max_ms=25000):
    cues = []
    for row in open(path):
        row = row.strip()
        if not row or row.startswith("#"):
            continue
        s, e, dash = (int(v) for v in row.split("\t"))
        cues.append([s, e, dash == 1])
    turns = []
    for c in cues:
        if turns:
            last = turns[-1]
            if not c[2] and not last[2] and c[0] - last[1] <= max_gap and c[1] - last[0] <= max_ms:
                last[1] = c[1]
                continue
        turns.append(list(c))
    return [(t[1] - t[0]) / 1000 for t in turns[from_turn:from_turn + count]]


def nvml_used(pid):
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    for row in out.splitlines():
        p, used = (v.strip() for v in row.split(","))
        if int(p) == pid:
            return int(used) << 20
    return 0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else 0.0


def firsts(lengths, every=0, upto=0.0):
    """Which of the workload's lines are sent as an editor's retake ("first": true):
    every every-th line (none where every is 0) and every line of at most upto seconds
    (none where upto is 0)."""
    return [(every > 0 and i % every == every - 1) or secs <= upto for i, secs in enumerate(lengths)]


def latency_of(rs):
    """p50, p95 and p95 of lines up to 5 s of results (status, result, latency, slot),
    with where a line up to 5 s spends its time on average."""
    lat = [r[2] for r in rs]
    short = [r for r in rs if r[3] <= 5]
    stages = {}
    for r in short:
        for k, v in r[1]["stages"].items():
            stages[k] = stages.get(k, 0.0) + v
    return {"lines": len(rs), "p50": round(pct(lat, 0.5), 2), "p95": round(pct(lat, 0.95), 2),
            "p95_upto_5s": round(pct([r[2] for r in short], 0.95), 2),
            "short_stage_seconds_mean": {k: round(v / len(short), 3) for k, v in stages.items()} if short else {}}


def run_batch(host, lengths, refs, tmp, concurrency, first=None):
    first = first or [False] * len(lengths)
    sem = threading.Semaphore(concurrency)
    results = [None] * len(lengths)
    peak_nvml = [0]
    stop = threading.Event()

    rates = []

    def watch():
        while not stop.wait(0.5):
            peak_nvml[0] = max(peak_nvml[0], nvml_used(os.getpid()))
            rates.append(host.batcher.snapshot()["decode_tokens_per_second"])

    def go(i, secs):
        try:
            t = time.perf_counter()
            body = {"text": "line", "target_seconds": secs, "seed": i,
                    "speaker": {"reference_audio_path": refs[i % len(refs)]},
                    "output_path": os.path.join(tmp, f"c{concurrency}-{i}.wav"), "first": first[i]}
            status, res = host.handle("POST", "/synthesize", body)
            results[i] = (status, res, time.perf_counter() - t, secs)
        finally:
            sem.release()

    torch.cuda.reset_peak_memory_stats()
    before = host.batcher.snapshot()
    w = threading.Thread(target=watch, daemon=True)
    w.start()
    start = time.perf_counter()
    threads = []
    for i, secs in enumerate(lengths):
        sem.acquire()
        t = threading.Thread(target=go, args=(i, secs))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    stop.set()
    ok = [r for r in results if r and r[0] == 200]
    latency = latency_of(ok)
    stages = {}
    for r in ok:
        for k, v in r[1]["stages"].items():
            stages[k] = stages.get(k, 0.0) + v
    _, h = host.handle("GET", "/health", None)
    steps = max(1, h["batch"]["steps"] - before["steps"])
    took = {k: h["batch"]["timing"][k] - before["timing"][k] for k in before["timing"]}
    # A decode step's wall time: its wait for the device, the GPT thread's CPU outside
    # it, and the rest, when the thread was ready but another held the GIL.
    step = {"ms": took["step"], "sync_ms": took["step_sync"], "cpu_ms": took["step_cpu"],
            "gil_ms": took["step"] - took["step_sync"] - took["step_cpu"]}
    return {
        "concurrency": concurrency, "lines": len(lengths), "ok": len(ok),
        "failed": [r[1]["error"] for r in results if r and r[0] != 200][:5],
        "audio_seconds": round(sum(r[1]["audio_seconds"] for r in ok), 1), "wall_seconds": round(wall, 1),
        "audio_per_wall": round(sum(r[1]["audio_seconds"] for r in ok) / wall, 2),
        "p50": latency["p50"], "p95": latency["p95"], "p95_upto_5s": latency["p95_upto_5s"],
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "peak_nvml_gib": round(peak_nvml[0] / 2**30, 2),
        "stage_seconds": {k: round(v, 1) for k, v in stages.items()},
        # Where a line up to 5 s spends its time, on average: what the latency target is of.
        "short_stage_seconds_mean": latency["short_stage_seconds_mean"],
        "batch_rows_max": h["batch"]["batch_rows_max"],
        "rows_mean": round(statistics.mean(r[1]["sequence"]["batch_rows_mean"] for r in ok), 1) if ok else 0,
        "s2mel_group_mean": round(statistics.mean(r[1]["sequence"]["s2mel_group"] for r in ok), 1) if ok else 0,
        "kv_mib_mean": round(statistics.mean(r[1]["sequence"]["kv_bytes"] for r in ok) / 2**20, 1) if ok else 0,
        "activation_mib_mean": round(statistics.mean(r[1]["sequence"]["activation_bytes"] for r in ok) / 2**20, 1)
        if ok else 0,
        "ooms": h["counters"]["ooms"],
        "decode_tokens_per_second_max": max(rates, default=0),
        "decode_tokens_per_second_median": round(statistics.median(rates), 1) if rates else 0,
        "steps": steps, "step": {k: round(v * 1e3 / steps, 2) for k, v in step.items()},
        "prefill_seconds": round(took["prefill"], 2),
        "s2mel_sms": h["batch"]["s2mel_sms"],
        # Whether lines joined s2mel at its next step (--s2mel-rolling) or in groups.
        "s2mel_rolling": h["batch"]["s2mel_rolling"],
        # With --first-every or --first-upto: the lines sent first, and the others.
        "first": latency_of([r for i, r in enumerate(results) if r and r[0] == 200 and first[i]])
        if any(first) else None,
        "bulk": latency_of([r for i, r in enumerate(results) if r and r[0] == 200 and not first[i]])
        if any(first) else None,
        # Every line: its slot (s), its latency (s), its stages and whether its s2mel ran
        # on the express lane, in the workload's order.
        "per_line": [{"seconds": r[3], "latency": round(r[2], 3), "first": first[i],
                      "s2mel_express": r[1]["sequence"]["s2mel_express"],
                      "stages": {k: round(v, 3) for k, v in r[1]["stages"].items()}}
                     for i, r in enumerate(results) if r and r[0] == 200],
    }


def stage_costs(host, secs=5.0, groups=(1, 4, 16)):
    """s2mel and the vocoder alone, for groups of lines of secs each: seconds per group
    and per line, with CUDA events (the GPT thread idle)."""
    a = host.adapter
    d, s2 = a.backend.dims, a.backend.s2mel
    frames = int(secs * a.tokens_per_second * bench_host.MEL_FRAMES_PER_TOKEN)
    prompt = int(8 * bench_host.SAMPLE_RATE / bench_host.HOP)
    out = []
    with torch.inference_mode():
        for n in groups:
            items = [(torch.randn(1, prompt + frames, d.dit_dim, device=a.device),
                      torch.randn(1, d.n_mels, prompt, device=a.device), torch.randn(1, d.style_dim, device=a.device),
                      i) for i in range(n)]
            times = {}
            for name, fn in (("s2mel", lambda: s2.inference_batch(items, a.opts.diffusion_steps)),):
                fn()
                torch.cuda.synchronize()
                t = time.perf_counter()
                mels = fn()
                torch.cuda.synchronize()
                times[name] = time.perf_counter() - t
            a.vocoder_batch(mels)
            torch.cuda.synchronize()
            t = time.perf_counter()
            a.vocoder_batch(mels)
            torch.cuda.synchronize()
            times["vocoder"] = time.perf_counter() - t
            out.append({"lines": n, "seconds_each": secs, **{k: round(v, 3) for k, v in times.items()},
                        "per_line": {k: round(v / n, 3) for k, v in times.items()}})
            del items, mels
    torch.cuda.empty_cache()
    return out


def baseline(opts, lengths, refs, tmp):
    """The one-request host: lines one after another (a version-1 host)."""
    b = bench_host.BenchBackend(opts)
    host = protocol.ModelHost(b)
    host.load()
    start = time.perf_counter()
    audio, lat, short = 0.0, [], []
    for i, secs in enumerate(lengths):
        t = time.perf_counter()
        body = {"text": "line", "target_seconds": secs, "speaker": {"reference_audio_path": refs[i % len(refs)]},
                "output_path": os.path.join(tmp, f"base-{i}.wav")}
        status, res = host.handle("POST", "/synthesize", body)
        if status != 200:
            return {"error": res}
        audio += res["audio_seconds"]
        lat.append(time.perf_counter() - t)
        if secs <= 5:
            short.append(lat[-1])
    wall = time.perf_counter() - start
    out = {"lines": len(lengths), "audio_per_wall": round(audio / wall, 2), "p50": round(pct(lat, 0.5), 2),
           "alone_upto_5s_p95": round(pct(short, 0.95), 2), "resident_gib": round(host.resident / 2**30, 2)}
    del host, b
    torch.cuda.empty_cache()
    return out


def divergence(host, refs, tmp, n_others=31):
    """One 3 s line alone, then inside a batch of others, in the production precision."""
    def body(name, secs, seed):
        return {"text": "line", "target_seconds": secs, "seed": seed, "speaker": {"reference_audio_path": refs[0]},
                "output_path": os.path.join(tmp, name + ".wav")}

    _, alone = host.handle("POST", "/synthesize", body("div-alone", 3.0, 99))
    res = [None] * (n_others + 1)

    def go(i, b):
        res[i] = host.handle("POST", "/synthesize", b)

    bodies = [body(f"div-o{i}", 1.0 + (i % 9), i) for i in range(n_others)]
    bodies.insert(n_others // 2, body("div-batched", 3.0, 99))
    ts = [threading.Thread(target=go, args=(i, b)) for i, b in enumerate(bodies)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    batched = res[n_others // 2][1]
    a, b = alone["codes"][0], batched["codes"][0]
    same = sum(1 for x, y in zip(a, b) if x == y)
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
    return {"tokens": len(a), "tokens_matching": same, "first_difference": first,
            "audio_relative_difference": relative_difference(pcm(alone["output_path"]), pcm(batched["output_path"])), "batch_rows_mean": batched["sequence"]["batch_rows_mean"]}


def profile(host, lengths, refs, tmp, concurrency, out):
    """Where a decode step's time goes at full load: every step's wall time and rows
    (Batcher._step wrapped), then the same run under torch.profiler, its operator
    tables by CUDA and by CPU time written to out."""
    b = host.batcher
    steps = []
    inner = b._step

    def timed():
        t = time.perf_counter()
        n = sum(len(s.rows) for s in b.active)
        inner()
        steps.append((n, time.perf_counter() - t))

    b._step = timed
    plain = run_batch(host, lengths, refs, tmp, concurrency)
    b._step = inner
    buckets = {}
    for n, dt in steps:
        k = min(n // 32 * 32, 192)
        buckets.setdefault(k, []).append(dt)
    res = {"run": {k: plain[k] for k in ("audio_per_wall", "wall_seconds", "p95_upto_5s")}, "steps": len(steps),
           "step_seconds_sum": round(sum(dt for _, dt in steps), 1),
           "step_ms_by_rows": {f"{k}-{k + 31}": {"steps": len(v), "median_ms": round(statistics.median(v) * 1e3, 2)}
                               for k, v in sorted(buckets.items())}}
    from torch.profiler import ProfilerActivity  # noqa: PLC0415
    from torch.profiler import profile as torch_profile  # noqa: PLC0415
    os.makedirs(out, exist_ok=True)
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        prof_run = run_batch(host, lengths[:60], refs, tmp, concurrency)
    ka = prof.key_averages()
    for key in ("cuda_time_total", "cpu_time_total", "self_cpu_time_total"):
        with open(os.path.join(out, f"profile-{key}.txt"), "w") as f:
            f.write(ka.table(sort_by=key, row_limit=40, max_name_column_width=60))
    trace = os.path.join(out, f"profile-{concurrency}.trace.json")
    prof.export_chrome_trace(trace)
    # The trace's tid of a CPU event is the thread's pthread_t (threading's ident), cut to
    # 32 bits; the OS thread id where a build records that instead.
    names = {}
    for t in threading.enumerate():
        names.update({t.ident: t.name, t.ident & 0xFFFFFFFF: t.name, t.native_id: t.name})
    with open(trace) as f:
        res["gpu_time"] = gpu_time(json.load(f), names)
    os.remove(trace)  # hundreds of MB; the split below is what is kept
    res["profiled_run"] = {k: prof_run[k] for k in ("audio_per_wall", "wall_seconds")}
    return res


def gpu_time(trace, thread_names):
    """The GPU's time in a chrome trace of torch.profiler: the span from the first
    kernel to the last, the time any kernel ran (their union), and each launching
    thread's kernels (the Batcher's gpt, s2mel threads; the vocoder's kernels are the
    s2mel thread's, on its own stream): time summed, by stream, and the costliest
    kernel names."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    launcher = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launcher[e["args"]["correlation"]] = thread_names.get(e.get("tid"), str(e.get("tid")))
    kernels = [e for e in events if e.get("cat") == "kernel" and "dur" in e]
    if not kernels:
        return {}
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels)
    busy, end = 0.0, spans[0][0]
    for a, b in spans:
        if b > end:
            busy += b - max(a, end)
            end = b
    by = {}
    for e in kernels:
        who = launcher.get(e.get("args", {}).get("correlation"), "?")
        d = by.setdefault(who, {"us": 0.0, "streams": {}, "kernels": {}})
        d["us"] += e["dur"]
        st = str(e.get("args", {}).get("stream", "?"))
        d["streams"][st] = d["streams"].get(st, 0.0) + e["dur"]
        d["kernels"][e["name"][:80]] = d["kernels"].get(e["name"][:80], 0.0) + e["dur"]
    span = spans[-1][1] - spans[0][0]
    return {"span_s": round(span / 1e6, 2), "busy_s": round(busy / 1e6, 2), "busy_share": round(busy / span, 3),
            "by_thread": {who: {"kernel_s": round(d["us"] / 1e6, 2),
                                "streams": {k: round(v / 1e6, 2) for k, v in d["streams"].items()},
                                "top": {k: round(v / 1e6, 3) for k, v in
                                        sorted(d["kernels"].items(), key=lambda kv: -kv[1])[:12]}}
                          for who, d in by.items()}}


def cprofile(host, lengths, refs, tmp, concurrency, out):
    """The GPT thread's CPU time in its decode steps and admissions, by function
    (cProfile around each call on that thread alone), at this concurrency: the table
    by own time goes to out/cprofile-C.txt."""
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415

    b = host.batcher
    prof = cProfile.Profile()
    wrapped = {}
    for name in ("_step", "_admit"):
        inner = getattr(b, name)

        def call(inner=inner):
            prof.enable()
            try:
                return inner()
            finally:
                prof.disable()
        wrapped[name] = inner
        setattr(b, name, call)
    try:
        res = run_batch(host, lengths, refs, tmp, concurrency)
    finally:
        for name, inner in wrapped.items():
            setattr(b, name, inner)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"cprofile-{concurrency}.txt"), "w") as f:
        st = pstats.Stats(prof, stream=f)
        st.sort_stats("tottime").print_stats(35)
        st.sort_stats("cumulative").print_stats(35)
    return {k: res[k] for k in ("audio_per_wall", "wall_seconds", "p95_upto_5s", "step")}


def pcm(path):
    import array

    with wave.open(path) as w:
        return array.array("h", w.readframes(w.getnframes()))


def relative_difference(pa, pb):
    n = min(len(pa), len(pb))
    num = sum((pa[i] - pb[i]) ** 2 for i in range(n)) ** 0.5
    den = sum(pa[i] ** 2 for i in range(n)) ** 0.5 or 1
    return round(num / den, 4)


def precision(args, refs, tmp):
    """The same 3 s line (same weights, seed and GPT codes) on two one-request hosts,
    s2mel's DiT in fp32 and in bf16: the audio difference and each s2mel time."""
    out = {}
    for dtype in ("fp32", "bf16"):
        opts = bench_host.parse_args([x for x in args if x != "--batch"] + ["--s2mel-dtype", dtype])
        b = bench_host.BenchBackend(opts)
        host = protocol.ModelHost(b)
        host.load()
        body = {"text": "line", "target_seconds": 3.0, "seed": 7, "speaker": {"reference_audio_path": refs[0]},
                "output_path": os.path.join(tmp, f"precision-{dtype}.wav")}
        host.handle("POST", "/synthesize", body)  # warm-up
        status, res = host.handle("POST", "/synthesize", body)
        if status != 200:
            return {"error": res}
        out[dtype] = {"s2mel_seconds": round(res["stages"]["s2mel"], 3), "path": body["output_path"]}
        del host, b
        torch.cuda.empty_cache()
    out["audio_relative_difference"] = relative_difference(pcm(out["fp32"].pop("path")), pcm(out["bf16"].pop("path")))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stride", type=int, default=4)
    p.add_argument("--concurrency", default="1,8,32,64")
    p.add_argument("--lines", type=int, default=150)
    p.add_argument("--baseline", type=int, default=0)
    p.add_argument("--divergence", action="store_true")
    p.add_argument("--kv-cache-bytes", type=int, default=0)
    p.add_argument("--max-sequences", type=int, default=0, help="default: the largest concurrency")
    p.add_argument("--beams", type=int, default=3)
    p.add_argument("--out", default=".")
    p.add_argument("--tf32", action="store_true", help="the host's --tf32")
    p.add_argument("--s2mel-dtype", default="fp32", choices=("fp32", "bf16"), help="the host's --s2mel-dtype")
    p.add_argument("--precision", action="store_true",
                   help="first: one 3 s line on one-request hosts with s2mel in fp32 and in bf16, compared")
    p.add_argument("--stage-costs", action="store_true", help="time s2mel and the vocoder alone first")
    p.add_argument("--name", default="", help="suffix of the result file")
    p.add_argument("--host-args", default="", help="more of the host's flags, e.g. --host-args=\"--no-decode-graphs --s2mel-graphs\"")
    p.add_argument("--profile", type=int, default=0,
                   help="at this concurrency, time every decode step and profile the run with torch.profiler "
                        "(tables in DIR/profile-*.txt)")
    p.add_argument("--warm", action="store_true",
                   help="run the workload once at each concurrency before the measured runs: a host that has served "
                        "a while has captured s2mel's graphs for the buckets it meets (captured lazily, on first use)")
    p.add_argument("--first-every", type=int, default=0,
                   help="send every Nth line as an editor's retake (\"first\": true) and report their latency apart")
    p.add_argument("--first-upto", type=float, default=0.0,
                   help="send every line of at most this many seconds first too (0: none): "
                        "priority by length, for the latency of short lines at load")
    p.add_argument("--cprofile", default="",
                   help="at these concurrencies (comma-separated), profile the GPT thread's steps with cProfile "
                        "(tables in DIR/cprofile-C.txt)")
    a = p.parse_args()
    conc = [int(c) for c in a.concurrency.split(",")]
    lengths = workload(os.path.join(ROOT, "bench", "gpucompare", "testdata", "film_cues.tsv"))[:a.lines]
    args = ["--port", "0", "--batch", "--gpt-dtype", "fp16", "--decode-stride", str(a.stride), "--beams", str(a.beams),
            "--max-sequences", str(a.max_sequences or max(conc)), "--return-codes", "--s2mel-dtype", a.s2mel_dtype]
    args += ["--tf32"] if a.tf32 else []
    args += a.host_args.split()
    if a.kv_cache_bytes:
        args += ["--kv-cache-bytes", str(a.kv_cache_bytes)]
    opts = bench_host.parse_args(args)
    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "stride": a.stride, "beams": a.beams,
              "host_args": a.host_args, "first_every": a.first_every, "first_upto": a.first_upto,
              "tf32": a.tf32, "s2mel_dtype": a.s2mel_dtype, "free_gib_at_start": round(torch.cuda.mem_get_info()[0] / 2**30, 1),
              "workload_seconds": round(sum(lengths), 1), "lines": len(lengths)}
    with tempfile.TemporaryDirectory() as tmp:
        refs = []
        for i in range(3):
            ref = os.path.join(tmp, f"ref{i}.wav")
            with wave.open(ref, "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(16000)
                w.writeframes(bytes([i + 1, 0]) * 16000 * 8)
            refs.append(ref)
        if a.precision:
            report["precision"] = precision(args, refs, tmp)
            print(json.dumps({"precision": report["precision"]}), flush=True)
        if a.baseline:
            report["baseline"] = baseline(opts, lengths[:a.baseline], refs, tmp)
            print(json.dumps({"baseline": report["baseline"]}), flush=True)
        host = bench_host.batching_host(opts)
        t = time.perf_counter()
        host.load()
        _, h = host.handle("GET", "/health", None)
        report["load"] = {"seconds": round(time.perf_counter() - t, 1), "resident_gib": round(h["resident_bytes"] / 2**30, 2),
                          "kv_cache_gib": round(h["batch"]["kv_cache_bytes"] / 2**30, 2),
                          "activation_mib_per_second": round(h["batch"]["activation_bytes_per_second"] / 2**20, 1),
                          "decode_graphs": h["batch"]["decode_graphs"],
                          "paged_attention": h["batch"]["paged_attention"],
                          "graph_capture_seconds": h["batch"]["graph_capture_seconds"],
                          "graph_pool_mib": round(h["batch"]["graph_pool_bytes"] / 2**20, 1),
                          "s2mel_sms": h["batch"]["s2mel_sms"], "s2mel_sms_off": h["batch"]["s2mel_sms_off"],
                          "vocoder_kernel": h.get("vocoder_kernel"), "vocoder_kernel_off": h.get("vocoder_kernel_off")}
        print(json.dumps({"load": report["load"]}), flush=True)
        run_batch(host, lengths[:8], refs, tmp, 8)  # warm-up: allocator, kernels
        if a.warm:  # every concurrency once first: s2mel's graphs of its buckets, cuDNN's choices
            for c in conc:
                run_batch(host, lengths, refs, tmp, c)
        if a.stage_costs:
            report["stage_costs"] = stage_costs(host)
            print(json.dumps({"stage_costs": report["stage_costs"]}), flush=True)
        report["runs"] = []
        for c in conc:
            r = run_batch(host, lengths, refs, tmp, c, firsts(lengths, a.first_every, a.first_upto))
            report["runs"].append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "per_line"}), flush=True)
        for c in (int(x) for x in a.cprofile.split(",") if x):
            report.setdefault("cprofile", {})[c] = cprofile(host, lengths, refs, tmp, c, a.out)
            print(json.dumps({"cprofile": {c: report["cprofile"][c]}}), flush=True)
        if a.profile:
            report["profile"] = profile(host, lengths, refs, tmp, a.profile, a.out)
            print(json.dumps({"profile": report["profile"]}), flush=True)
        if a.divergence:
            report["divergence"] = divergence(host, refs, tmp)
            print(json.dumps({"divergence": report["divergence"]}), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"batch-stride{a.stride}{a.name}.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"stride {a.stride} tf32 {a.tf32} s2mel {a.s2mel_dtype} host args '{a.host_args}' {a.name}")
    print("| C | audio s/s | p50 s | p95 s | p95 ≤5 s | peak alloc GiB | NVML GiB | rows max | tok/s med | "
          "step ms: wall / sync / cpu / gil | failed |")
    for r in report["runs"]:
        st = r["step"]
        print(f"| {r['concurrency']} | {r['audio_per_wall']} | {r['p50']} | {r['p95']} | {r['p95_upto_5s']} | "
              f"{r['peak_allocated_gib']} | {r['peak_nvml_gib']} | {r['batch_rows_max']} | "
              f"{r['decode_tokens_per_second_median']} | {st['ms']} / {st['sync_ms']} / {st['cpu_ms']} / "
              f"{st['gil_ms']} | {r['lines'] - r['ok']} |")
    if a.first_every or a.first_upto:
        print(f"first: every {a.first_every}th line, every line up to {a.first_upto} s")
        print("| C | first: lines | p50 s | p95 s | p95 ≤5 s | the others: p50 s | p95 ≤5 s |")
        for r in report["runs"]:
            f, b = r["first"], r["bulk"]
            print(f"| {r['concurrency']} | {f['lines']} | {f['p50']} | {f['p95']} | {f['p95_upto_5s']} | "
                  f"{b['p50']} | {b['p95_upto_5s']} |")


if __name__ == "__main__":
    main()
