"""The batching core (batching.py) with the benchmark model at tiny dimensions, in fp32
on the CPU: a line decoded in a batch, with others of different lengths joining and
leaving, gives the same mel codes as alone and as the one-request host's beam search;
the paged KV cache gives back every block; lines wait for KV and are refused when
they can never fit; an out-of-memory error inside a batch fails that batch's lines as
retryable and the host goes on. Skipped without torch (Debian's python3-torch is
enough; on the GPU machine the same tests run on CUDA when BATCHING_TEST_DEVICE=cuda)."""

import importlib.util
import os
import tempfile
import threading
import time
import unittest
import wave

HAS_TORCH = importlib.util.find_spec("torch") is not None
DEVICE = os.environ.get("BATCHING_TEST_DEVICE", "cpu")


def write_ref(path, seconds=3):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\1\0" * int(16000 * seconds))


class HostCase:
    """A tiny benchmark host per test, its reference audio and requests: the fixture of
    the test classes below."""

    def make_host(self, *extra, kv=0, beams=3, stride=1, max_sequences=8):
        import bench_host

        args = ["--port", "0", "--batch", "--gpt-dtype", "fp32", "--device", DEVICE, "--beams", str(beams),
                "--decode-stride", str(stride), "--max-sequences", str(max_sequences), "--diffusion-steps", "3",
                "--return-codes", *extra]
        if kv or DEVICE == "cuda":  # on CUDA a host would otherwise take 40% of the free memory
            args += ["--kv-cache-bytes", str(kv or 256 << 20)]
        opts = bench_host.parse_args(args)
        host = bench_host.batching_host(opts, bench_host.Dims.tiny())
        host.load()
        return host

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.ref = os.path.join(self.tmp.name, "ref.wav")
        write_ref(self.ref)

    def tearDown(self):
        self.tmp.cleanup()

    def body(self, name, seconds, seed=7, text="a line of the script"):
        return {"text": text, "target_seconds": seconds, "seed": seed,
                "speaker": {"reference_audio_path": self.ref},
                "output_path": os.path.join(self.tmp.name, name + ".wav")}

    def synth(self, host, body):
        status, res = host.handle("POST", "/synthesize", body)
        self.assertEqual(status, 200, res)
        return res

    def run_staggered(self, host, bodies, gap_steps=3):
        """Sends bodies one after another, each once the batch has made gap_steps more
        decode steps, so lines join a running batch at different steps."""
        results = [None] * len(bodies)

        def go(i):
            results[i] = host.handle("POST", "/synthesize", bodies[i])

        threads = []
        for i in range(len(bodies)):
            start = host.batcher.stats["steps"]
            t = threading.Thread(target=go, args=(i,))
            t.start()
            threads.append(t)
            deadline = time.monotonic() + 30
            while host.batcher.stats["steps"] < start + gap_steps and t.is_alive() and time.monotonic() < deadline:
                time.sleep(0.001)
        for t in threads:
            t.join(120)
        for status, res in results:
            self.assertEqual(status, 200, res)
        return [res for _, res in results]

    def assert_audio_close(self, got_paths, want_paths, what=""):
        """Each pair of WAVs has the same length and samples at most 2 LSB apart."""
        for gp, wp in zip(got_paths, want_paths, strict=True):
            a, b = read_samples(gp), read_samples(wp)
            self.assertEqual(len(a), len(b), f"{what}: {gp}")
            diff = max(abs(x - y) for x, y in zip(a, b))
            self.assertLessEqual(diff, 2, f"{what}: audio of {gp} differs by {diff} LSB")

    def render(self, host, tag):
        """Six lines of different lengths, staggered into a running batch."""
        lengths = (1.2, 0.4, 2.0, 0.8, 1.6, 3.0)
        bodies = [self.body(f"{tag}{i}", s, seed=i) for i, s in enumerate(lengths)]
        return self.run_staggered(host, bodies, gap_steps=2), [b["output_path"] for b in bodies]


@unittest.skipUnless(HAS_TORCH, "needs torch")
class BatchingTest(HostCase, unittest.TestCase):
    def assert_pool_empty(self, host):
        pool = host.batcher.pool
        deadline = time.monotonic() + 5
        while len(pool.free) != pool.n_blocks - 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(len(pool.free), pool.n_blocks - 1, "every KV block is back")
        self.assertEqual(pool.promised, {})
        self.assertEqual(sum(pool.refs), 0)

    def check_same_tokens(self, beams, stride, *extra):
        host = self.make_host(*extra, beams=beams, stride=stride)
        target = self.body("target", 1.2)
        alone = self.synth(host, target)["codes"]
        others = [self.body(f"o{i}", s, seed=i) for i, s in enumerate((0.4, 2.0, 0.8, 1.6))]
        bodies = [others[0], others[1], target, others[2], others[3]]
        batched = self.run_staggered(host, bodies)
        self.assertEqual(batched[2]["codes"], alone, f"beams {beams}, stride {stride}: batched == alone")
        self.assertGreater(host.batcher.stats["batch_rows_max"], beams, "lines really shared a batch")
        rows = batched[2]["sequence"]["batch_rows_mean"]
        self.assertGreater(rows, beams, "the target decoded beside others")
        self.assert_pool_empty(host)
        return host, alone

    def test_s2mel_graphs_flags(self):
        import bench_host

        for extra, want in (((), None), (("--s2mel-graphs",), True), (("--no-s2mel-graphs",), False)):
            self.assertEqual(bench_host.parse_args(["--batch", *extra]).s2mel_graphs, want, extra)
        if DEVICE != "cuda":
            host = self.make_host("--s2mel-dtype", "bf16")
            self.assertFalse(host.adapter.info()["s2mel_graphs"], "no graphs without CUDA")

    @unittest.skipIf(DEVICE == "cuda", "on CUDA PagedAttentionTest checks the kernel")
    def test_without_cuda_the_host_gathers_and_says_why(self):
        snap = self.make_host().batcher.snapshot()
        self.assertFalse(snap["paged_attention"])
        self.assertIn(snap["paged_attention_off"], ("Triton is not installed", "not on CUDA"))

    def test_batched_equals_alone_beam_search(self):
        host, alone = self.check_same_tokens(beams=3, stride=1)
        # ... and equals the one-request host's beam search (BenchBackend.generate).
        import torch

        a = host.adapter
        req = __import__("protocol").parse_synthesis(self.body("target", 1.2))
        with torch.inference_mode():
            cond = a.conditioning(req)
            (text, limit, _), = a.segments(req)
            codes = a.backend.gpt.generate(cond["gpt_cond"], text, limit, 3, 1)
        self.assertEqual([codes[0].tolist()], alone)

    def test_batched_equals_alone_greedy_and_stride(self):
        host, _ = self.check_same_tokens(1, 1, "--greedy")
        self.assertEqual(host.batcher.snapshot()["decode"], "greedy")
        self.check_same_tokens(beams=3, stride=4)

    # -- one beam, sampled ----------------------------------------------------------------

    def test_sampled_batched_equals_alone(self):
        """One beam samples by default (as a profile with 1 beam starts it: --beams 1 and
        nothing else), and a line's draw is the same alone and in a batch that lines of
        other lengths and seeds join and leave, at stride 1 and 4."""
        host, alone = self.check_same_tokens(1, 1)
        self.assertEqual(host.batcher.snapshot()["decode"], "sample")
        _, h = host.handle("GET", "/health", None)
        self.assertEqual(h["batch"]["decode"], "sample")
        greedy = self.synth(self.make_host("--greedy", beams=1), self.body("greedy", 1.2))["codes"]
        self.assertNotEqual(alone, greedy, "the sampled tokens are not the likeliest ones")
        self.check_same_tokens(1, 4)

    def test_sampling_follows_the_seed(self):
        """The same line with the same seed gives the same tokens, with another seed
        others; with --top-k 1 it is the greedy choice."""
        host = self.make_host(beams=1)
        a = self.synth(host, self.body("a", 1.2, seed=7))["codes"]
        again = self.synth(host, self.body("again", 1.2, seed=7))["codes"]
        other = self.synth(host, self.body("other", 1.2, seed=8))["codes"]
        self.assertEqual(a, again)
        self.assertNotEqual(a, other, "another seed, another draw")
        same = sum(x == y for x, y in zip(a[0], other[0]))
        self.assertLess(same, len(a[0]) // 2, f"{same} of {len(a[0])} tokens alike: the draws are not independent")
        top1 = self.synth(self.make_host("--top-k", "1", beams=1), self.body("top1", 1.2, seed=7))["codes"]
        greedy = self.synth(self.make_host("--greedy", beams=1), self.body("greedy", 1.2, seed=7))["codes"]
        self.assertEqual(top1, greedy)

    def test_sampled_tokens_stay_in_the_top_k(self):
        """Every token a batch samples is among the top_k likeliest of its row's
        (penalised) logits, and within top_p of their mass."""
        import torch

        import batching

        seen = []
        real = batching.sample_tokens

        def record(logits, keys, top_k, top_p, temperature):
            tok = real(logits, keys, top_k, top_p, temperature)
            seen.append((logits.clone(), tok.clone(), top_k, top_p, temperature))
            return tok

        batching.sample_tokens = record
        self.addCleanup(setattr, batching, "sample_tokens", real)
        # Eager steps: a decode graph calls sample_tokens once, as it is captured.
        host = self.make_host("--top-k", "5", "--top-p", "0.9", "--no-decode-graphs", beams=1)
        self.run_staggered(host, [self.body(f"l{i}", s, seed=i) for i, s in enumerate((0.6, 1.0, 0.4))], gap_steps=2)
        self.assertGreater(max(len(t) for _, t, *_ in seen), 1, "rows sampled together")
        kept = 0
        for logits, tok, top_k, top_p, temp in seen:
            self.assertEqual((top_k, top_p, temp), (5, 0.9, 0.8))
            vals, idx = logits.topk(top_k, dim=-1)
            probs = torch.softmax(vals / temp, dim=-1)
            for r in range(tok.shape[0]):
                row = idx[r].tolist()
                self.assertIn(int(tok[r]), row, "the token is one of the top k")
                rank = row.index(int(tok[r]))
                self.assertLess(float(probs[r, :rank].sum()), top_p, "the likelier tokens did not already reach top_p")
                kept += rank > 0
        self.assertGreater(kept, 0, "some draws were not the likeliest token")

    def test_audio_batched_and_alone(self):
        """s2mel and the vocoder batched: the same line's audio alone and in a group of
        other lengths differs only by rounding (padded frames are masked)."""
        host = self.make_host()
        target = self.body("alone", 1.0)
        self.synth(host, target)
        with wave.open(target["output_path"]) as w:
            alone = w.readframes(w.getnframes())
        target = self.body("batched", 1.0)
        # Four lines finishing together land in one s2mel group.
        bodies = [target, self.body("b1", 1.1, seed=1), self.body("b2", 0.9, seed=2), self.body("b3", 1.05, seed=3)]
        res = self.run_staggered(host, bodies, gap_steps=0)
        self.assertTrue(any(r["sequence"]["s2mel_group"] > 1 for r in res), [r["sequence"] for r in res])
        with wave.open(target["output_path"]) as w:
            batched = w.readframes(w.getnframes())
        self.assertEqual(len(batched), len(alone))
        import array

        a, b = array.array("h", alone), array.array("h", batched)
        diff = max(abs(x - y) for x, y in zip(a, b))
        # The vocoder's last frames see padding instead of the end of the signal: allow
        # a difference there, none of note before it.
        body = len(a) - 256 * 8
        head = max((abs(x - y) for x, y in zip(a[:body], b[:body])), default=0)
        self.assertLessEqual(head, 2, f"audio differs before the tail by {head} (whole: {diff})")

    def test_health_and_sequence_figures(self):
        host = self.make_host()
        status, h = host.handle("GET", "/health", None)
        self.assertEqual(status, 200)
        self.assertEqual(h["protocol"], 2)
        self.assertEqual(h["concurrency"], 8)
        b = h["batch"]
        for key in ("max_sequences", "beams", "block_tokens", "kv_bytes_per_token", "kv_cache_bytes", "kv_free_bytes",
                    "prefix_tokens", "tokens_per_second", "activation_bytes_per_second", "decoding", "in_s2mel",
                    "waiting", "decode_tokens_per_second", "batch_rows_max", "steps"):
            self.assertIn(key, b)
        d = host.adapter.backend.dims
        self.assertEqual(b["kv_bytes_per_token"], d.gpt_layers * 2 * d.gpt_dim * 4)
        self.assertEqual((b["vocoder_kernel"], b["vocoder_kernel_off"]), ("torch", ""), "not asked for: no news")
        res = self.synth(host, self.body("one", 1.0))
        seq = res["sequence"]
        tokens_in_cache = d.cond_latents + 5 + 3 * 50  # prompt (text of about 5 tokens) + 3 beams x 50 tokens
        self.assertGreater(seq["kv_bytes"], 0)
        self.assertLessEqual(seq["kv_bytes"], (tokens_in_cache + 3 * 2 * 32) * b["kv_bytes_per_token"])
        self.assertEqual(res["peak_allocated_bytes"], seq["kv_bytes"] + seq["activation_bytes"])
        for stage in ("queue", "conditioning", "gpt", "s2mel_wait", "s2mel", "vocoder", "total"):
            self.assertIn(stage, res["stages"])
        self.assertGreaterEqual(res["stages"]["s2mel_wait"], 0)
        self.assertEqual(seq["s2mel_wait_seconds"], res["stages"]["s2mel_wait"], "the take records the wait too")
        self.assertLess(sum(res["stages"][k] for k in ("queue", "gpt", "s2mel_wait", "s2mel", "vocoder")),
                        res["stages"]["total"], "the stages follow one another within the request")
        self.assertAlmostEqual(res["audio_seconds"], 1.0, delta=0.05)

    def test_the_vocoder_kernel_is_in_the_batch(self):
        """--vocoder-fused: the batch says which activations run, and why not the fused
        kernel where its check failed (on the CPU: not on CUDA), for the GPU page."""
        _, h = self.make_host("--vocoder-fused").handle("GET", "/health", None)
        if DEVICE == "cuda":
            self.assertEqual((h["batch"]["vocoder_kernel"], h["batch"]["vocoder_kernel_off"]), ("fused", ""))
        else:
            self.assertEqual((h["batch"]["vocoder_kernel"], h["batch"]["vocoder_kernel_off"]), ("torch", "not on CUDA"))

    def test_lines_wait_for_kv_blocks(self):
        """A cache that holds one line at a time: the second waits, then runs."""
        probe = self.make_host()
        per_block = probe.batcher.pool.block_bytes()
        host = self.make_host(kv=per_block * 14)
        res = self.run_staggered(host, [self.body("a", 1.0), self.body("b", 1.0, seed=2)], gap_steps=1)
        self.assertGreater(res[1]["sequence"]["queue_seconds"], 0)
        self.assertEqual(host.batcher.stats["batch_rows_max"], 3, "never two lines in the cache at once")
        self.assert_pool_empty(host)

    def test_a_first_line_is_admitted_ahead_of_the_lines_waiting(self):
        """One line decoding at a time: a first line sent after a bulk one, both while
        another decodes, is admitted before it (and both behind an earlier first)."""
        host = self.make_host(max_sequences=1)
        bodies = [self.body("a", 3.0), self.body("bulk", 1.0, seed=2), self.body("first-1", 1.0, seed=3),
                  self.body("first-2", 1.0, seed=4)]
        for body in bodies[2:]:
            body["first"] = True
        results, sent = [None] * len(bodies), [0.0] * len(bodies)

        def go(i):
            sent[i] = time.perf_counter()
            results[i] = host.handle("POST", "/synthesize", bodies[i])

        threads = [threading.Thread(target=go, args=(i,)) for i in range(len(bodies))]
        threads[0].start()
        deadline = time.monotonic() + 30
        while host.batcher.stats["steps"] < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        for t in threads[1:]:
            t.start()
            time.sleep(0.005)  # in this order into the host's inbox
        for t in threads:
            t.join(120)
        for status, res in results:
            self.assertEqual(status, 200, res)
        admitted = [sent[i] + results[i][1]["sequence"]["queue_seconds"] for i in range(len(bodies))]
        self.assertLess(admitted[0], admitted[2])
        self.assertLess(admitted[2], admitted[3], "first lines keep their order among themselves")
        self.assertLess(admitted[3], admitted[1], "the bulk line waited behind both")

    def test_short_and_first_lines_take_the_express_lane(self):
        """With --s2mel-express, lines of at most that many seconds and first lines run
        s2mel on the second thread, the rest on the first; each line's audio is what a
        host of one s2mel thread gives it."""
        bodies = [self.body("short", 0.4, seed=1), self.body("long", 2.0, seed=2),
                  self.body("first", 2.0, seed=3), self.body("edge", 1.0, seed=4)]
        bodies[2]["first"] = True
        host = self.make_host("--s2mel-express", "1.0")
        self.assertEqual([lane.express for lane in host.batcher.lanes], [False, True])
        self.assertEqual(host.batcher.snapshot()["s2mel_express"], 1.0)
        got = self.run_staggered(host, bodies, gap_steps=1)
        self.assertEqual([r["sequence"]["s2mel_express"] for r in got], [True, False, True, True])
        paths = [b["output_path"] for b in bodies]
        want_paths = [p + ".one.wav" for p in paths]
        one = self.make_host()
        self.assertEqual(len(one.batcher.lanes), 1)
        want = self.run_staggered(one, [dict(b, output_path=p) for b, p in zip(bodies, want_paths)], gap_steps=1)
        self.assertEqual([r["sequence"]["s2mel_express"] for r in want], [False] * 4)
        for g, w in zip(got, want):
            self.assertEqual(g["codes"], w["codes"])
        self.assert_audio_close(paths, want_paths, "express")

    def test_s2mel_express_must_be_seconds(self):
        import batching
        import bench_host

        for bad in ("-1", "inf", "nan"):
            with self.subTest(bad=bad), self.assertRaises(SystemExit) as e:
                batching.decode_settings(bench_host.parse_args(["--batch", "--s2mel-express", bad]), "bench_host")
            self.assertIn("--s2mel-express", str(e.exception))

    def test_a_line_that_never_fits_is_refused(self):
        probe = self.make_host()
        host = self.make_host(kv=probe.batcher.pool.block_bytes() * 6)
        status, res = host.handle("POST", "/synthesize", self.body("long", 3.0))
        self.assertEqual(status, 400, res)
        self.assertIn("KV cache", res["error"]["message"])
        self.assert_pool_empty(host)

    def test_out_of_memory_in_a_batch_is_retryable_and_the_host_goes_on(self):
        # Kernel by kernel: a decode graph replays kernels, not the Python layer this test
        # makes fail (and a replay allocates nothing, so it cannot run out of memory).
        host = self.make_host("--no-decode-graphs")
        layer = host.adapter.layers_list[0]
        real = layer.qkv
        calls = {"n": 0}

        def flaky(x):
            calls["n"] += 1
            if calls["n"] == 12:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
            return real(x)

        layer.qkv = flaky
        results = [None, None]

        def go(i, body):
            results[i] = host.handle("POST", "/synthesize", body)

        threads = [threading.Thread(target=go, args=(i, self.body(f"l{i}", 1.0, seed=i))) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        codes = sorted(r[0] for r in results)
        self.assertIn(507, codes, results)
        self.assertEqual(results[[r[0] for r in results].index(507)][1]["error"]["code"], "out_of_memory")
        self.assert_pool_empty(host)
        self.synth(host, self.body("after", 0.6))
        _, h = host.handle("GET", "/health", None)
        self.assertGreaterEqual(h["counters"]["ooms"], 1)

    def test_a_line_whose_later_segment_fails_its_prefill_leaves_the_batch(self):
        """A line of three segments whose second prefill fails fails as a whole: its
        first segment, already in the batch, leaves it too, and the line decoding beside
        it makes the tokens it makes alone."""
        host = self.make_host()
        running = self.body("running", 2.0)
        alone = self.synth(host, running)["codes"]
        real = host.adapter.embed_prefix
        calls = {"n": 0}

        def failing(cond, text_tokens):
            calls["n"] += 1
            if calls["n"] == 3:  # the running line's prefill is the first, the long line's the next three
                raise RuntimeError("injected: the second segment's prefill fails")
            return real(cond, text_tokens)

        host.adapter.embed_prefix = failing
        long = dict(self.body("long", 1.5, text="one two three four five six"), max_text_tokens_per_segment=2)
        results = {}
        t = threading.Thread(target=lambda: results.update(running=host.handle("POST", "/synthesize", running)))
        start = host.batcher.stats["steps"]
        t.start()
        deadline = time.monotonic() + 30
        while host.batcher.stats["steps"] < start + 3 and time.monotonic() < deadline:
            time.sleep(0.001)
        status, res = host.handle("POST", "/synthesize", long)
        t.join(60)
        self.assertEqual(calls["n"], 3, "the long line had three segments and the second failed")
        self.assertEqual(status, 500, res)
        self.assertIn("injected", res["error"]["message"])
        self.assertEqual(results["running"][0], 200, results["running"])
        self.assertEqual(results["running"][1]["codes"], alone, "the running line decoded as alone")
        self.assert_pool_empty(host)
        self.assertEqual(host.batcher.active, [])

    def test_s2mel_in_bf16(self):
        """--s2mel-dtype bf16: the same line's audio as in fp32 up to bf16 rounding (the
        DiT really ran in bf16: the samples are not identical)."""
        import array

        pcm = {}
        for dtype in ("fp32", "bf16"):
            host = self.make_host("--s2mel-dtype", dtype)
            body = self.body(dtype, 1.0)
            self.synth(host, body)
            with wave.open(body["output_path"]) as w:
                pcm[dtype] = array.array("h", w.readframes(w.getnframes()))
        a, b = pcm["fp32"], pcm["bf16"]
        self.assertEqual(len(a), len(b))
        self.assertNotEqual(a, b)
        err = sum((x - y) ** 2 for x, y in zip(a, b)) / len(a)
        power = sum(x * x for x in a) / len(a)
        self.assertLess(err, 1e-3 * power, f"bf16 error {err:.1f} against signal power {power:.1f}")

    def test_rows_joining_at_their_own_steps_give_their_mels_alone(self):
        """The adapter's FlowTable with rows joining and leaving at other rows' steps
        (the slots kept while the bucket holds, every row seated again when it
        changes: more rows, more frames, fewer), and with the rows set aside while a
        first line runs its steps alone, gives each row the mel of the eager flow of its
        line alone (the graphs' own case:
        CudaGraphTest.test_s2mel_graph_equals_the_eager_flow)."""
        import torch

        import batching
        import bench_host

        host = self.make_host("--no-s2mel-graphs", "--diffusion-steps", "5")
        a = host.adapter
        s2, d = a.backend.s2mel, a.backend.dims
        g = torch.Generator(device="cpu").manual_seed(5)

        def item(frames, prompt, seed):
            return (torch.randn(1, frames, d.dit_dim, generator=g).to(a.device),
                    torch.randn(1, d.n_mels, prompt, generator=g).to(a.device),
                    torch.randn(1, d.style_dim, generator=g).to(a.device), seed)

        items = {"a": item(400, 100, 1), "b": item(380, 100, 2), "short": item(150, 100, 3), "long": item(700, 90, 4),
                 "first": item(260, 100, 5)}
        with torch.inference_mode():
            rows = {k: batching.S2MelRow(None, bench_host.FlowRow(s2, *it), it[0].shape[1]) for k, it in items.items()}
            table = bench_host.FlowTable(s2, 5, a.device)
            seated, mels = [], {}
            # (step, rows joining): b joins a's bucket of rows 2, short changes it to 3,
            # long widens the frames; the rest leave as they end, the last alone.
            joins = {0: ["a"], 1: ["b"], 2: ["short"], 4: ["long"]}
            for step in range(20):
                seated += [rows[k] for k in joins.get(step, [])]
                if not seated:
                    break
                if step == 3:  # a first line: the rows seated wait at their steps
                    table.set_aside(seated)
                    first = rows["first"]
                    while first.done < 5:
                        table.step([first])
                    mels["first"] = table.mel_of(first)
                table.step(seated)
                for k, r in rows.items():
                    if r in seated and r.done == 5:
                        mels[k] = table.mel_of(r)
                seated = [r for r in seated if r.done < 5]
            self.assertEqual(sorted(mels), sorted(items))
            for k, it in items.items():
                want, = s2.inference_batch([it], 5)
                self.assertEqual(mels[k].shape, want.shape, k)
                err = float((mels[k] - want).abs().max() / want.abs().max())
                self.assertLess(err, 1e-4, f"{k}: {err}")

    def test_bad_settings_are_refused(self):
        import bench_host

        for flag, value in (("--max-sequences", "0"), ("--top-k", "-1"), ("--top-p", "0"), ("--temperature", "nan"),
                            ("--s2mel-sms", "-1"), ("--s2mel-waste", "-0.5"), ("--s2mel-waste", "inf")):
            opts = bench_host.parse_args(["--port", "0", "--batch", flag, value])
            with self.assertRaises(SystemExit, msg=flag) as cm:
                bench_host.batching_host(opts, bench_host.Dims.tiny())
            self.assertIn(flag, str(cm.exception))


@unittest.skipUnless(HAS_TORCH, "needs torch")
class SampleTokensTest(unittest.TestCase):
    """batching.sample_tokens on its own: a row's draw does not depend on the other
    rows, never leaves the top k, follows the softmax, and the counter-based noise is
    uniform and exact in int64."""

    def test_hash_is_exact_and_the_same_on_ints_and_tensors(self):
        import torch

        import batching

        xs = [0, 1, 2, 0x7FFFFFFF, 0xFFFFFFFF, 123456789]
        want = []
        for x in xs:  # lowbias32 in plain 32-bit arithmetic
            x ^= x >> 16
            x = (x * 0x7FEB352D) & 0xFFFFFFFF
            x ^= x >> 15
            x = (x * 0x846CA68B) & 0xFFFFFFFF
            want.append(x ^ (x >> 16))
        self.assertEqual([batching.hash32(x) for x in xs], want)
        self.assertEqual(batching.hash32(torch.tensor(xs)).tolist(), want)
        self.assertNotEqual(batching.sequence_key(7, 0), batching.sequence_key(7, 1))
        self.assertNotEqual(batching.sequence_key(7, 0), batching.sequence_key(8, 0))
        self.assertLess(batching.sequence_key(-1, 3), 1 << 32)
        ends = batching.gumbel_of(torch.tensor([0, 1, 0xFFFFFFFE, 0xFFFFFFFF]))
        self.assertTrue(bool(torch.isfinite(ends).all()), ends)
        self.assertEqual(ends.argsort().tolist(), [0, 1, 2, 3], "more bits, more noise")

    def test_a_rows_draw_does_not_depend_on_the_batch(self):
        import torch

        import batching

        g = torch.Generator().manual_seed(0)
        logits = torch.randn(16, 300, generator=g) * 3
        keys = torch.tensor([batching.hash32(i) for i in range(16)])
        together = batching.sample_tokens(logits, keys)
        for i in range(16):
            self.assertEqual(int(batching.sample_tokens(logits[i:i + 1], keys[i:i + 1])[0]), int(together[i]))
        shuffled = torch.randperm(16, generator=g)
        self.assertEqual(batching.sample_tokens(logits[shuffled], keys[shuffled]).tolist(), together[shuffled].tolist())

    def test_draws_stay_in_the_top_k_and_follow_the_softmax(self):
        import torch

        import batching

        g = torch.Generator().manual_seed(1)
        row = torch.randn(300, generator=g) * 2
        n = 20000
        logits = row.expand(n, -1)
        keys = torch.tensor([batching.hash32(batching.sequence_key(5, 0) ^ step) for step in range(n)])
        tok = batching.sample_tokens(logits, keys, top_k=30, top_p=1.0, temperature=0.8)
        top = set(row.topk(30).indices.tolist())
        self.assertTrue(set(tok.tolist()) <= top, "never outside the top 30")
        vals, idx = row.topk(30)
        probs = torch.softmax(vals / 0.8, dim=-1)
        counts = torch.bincount(tok, minlength=300)[idx].float() / n
        # 20,000 draws: each frequency within 5 standard errors of its probability.
        se = (probs * (1 - probs) / n).sqrt()
        self.assertTrue(bool(((counts - probs).abs() <= 5 * se + 1e-4).all()), (counts - probs).abs().max())
        # top_p keeps the fewest likeliest tokens that reach it.
        tok = batching.sample_tokens(logits, keys, top_k=30, top_p=0.5, temperature=0.8)
        need = int((probs.cumsum(0) < 0.5).sum()) + 1
        self.assertEqual(set(tok.tolist()), set(idx[:need].tolist()))
        self.assertEqual(set(batching.sample_tokens(logits[:50], keys[:50], top_k=1).tolist()), {int(idx[0])})


def read_samples(path):
    import array

    with wave.open(path) as w:
        return array.array("h", w.readframes(w.getnframes()))


@unittest.skipUnless(HAS_TORCH and DEVICE == "cuda", "CUDA graphs need CUDA (BATCHING_TEST_DEVICE=cuda)")
class CudaGraphTest(HostCase, unittest.TestCase):
    """The decode step's and s2mel's CUDA graphs give what the same host gives
    launching kernel by kernel: the same lines, joining a running batch at different
    steps, on a host with graphs and on one without."""

    def test_graphs_give_the_tokens_and_audio_of_eager_launches(self):
        import batching

        for beams in (3, 1):
            extra = ("--greedy",) if beams == 1 else ()
            graphed = self.make_host(*extra, "--s2mel-graphs", beams=beams)
            eager = self.make_host(*extra, "--no-decode-graphs", beams=beams)
            snap = graphed.batcher.snapshot()
            b = graphed.batcher
            self.assertEqual(snap["decode_graphs"], sum(1 for r in b.graph_rows for w in b.graph_widths
                                                        if r * w <= b.pool.n_blocks))
            self.assertGreater(snap["graph_pool_bytes"], 0)
            a = graphed.adapter
            most = min(a.max_positions, a.prefix_tokens + batching.PREFILL_GRAPH_TEXT_TOKENS)
            self.assertEqual(snap["prefill_graphs"], -(-most // batching.BLOCK_TOKENS))
            self.assertEqual(eager.batcher.snapshot()["decode_graphs"], 0)
            self.assertEqual(eager.batcher.snapshot()["prefill_graphs"], 0)
            got, got_paths = self.render(graphed, f"g{beams}-")
            want, want_paths = self.render(eager, f"e{beams}-")
            for g, w in zip(got, want):
                self.assertEqual(g["codes"], w["codes"], f"beams {beams}: graphed tokens == eager tokens")
            steps = graphed.batcher.stats
            self.assertEqual(steps["graph_steps"], steps["steps"], "every step of this batch replayed a graph")
            self.assertEqual(steps["graph_prefills"], steps["prefills"], "and every prefill")
            self.assertEqual(eager.batcher.stats["graph_steps"], 0)
            self.assertEqual(eager.batcher.stats["graph_prefills"], 0)
            self.assertGreater(len(graphed.batcher.lanes[0].table.graphs), 0, "s2mel replayed graphs")
            # The tiny model's vocoder barely follows its mel (two seeds' audio is at most 32
            # LSB apart), so this checks the path end to end, not s2mel's arithmetic:
            # test_s2mel_graph_equals_the_eager_flow compares the mels themselves.
            self.assert_audio_close(got_paths, want_paths, f"beams {beams}")

    def test_s2mel_graphs_follow_the_precision_unless_told(self):
        """On by default with s2mel in bf16 (launch-bound), off in fp32 (compute-bound,
        where the buckets' padding costs more); either flag overrides."""
        for extra, want in ((("--s2mel-dtype", "bf16"), True), ((), False),
                            (("--s2mel-dtype", "bf16", "--no-s2mel-graphs"), False), (("--s2mel-graphs",), True)):
            host = self.make_host(*extra)
            self.assertEqual(host.adapter.info()["s2mel_graphs"], want, extra)
            self.assertEqual(host.batcher.lanes[0].table.graphs is not None, want, extra)

    def test_s2mel_graph_equals_the_eager_flow(self):
        """Rows in a graph's bucket of rows and frames give each line's mel of the
        eager flow alone, seated as a group, joining at other rows' steps or set aside
        while a first line runs; a bucket larger than the buffers replaces them and
        still agrees."""
        import torch

        import batching
        import bench_host

        host = self.make_host("--s2mel-graphs")
        a = host.adapter
        s2, d, steps = a.backend.s2mel, a.backend.dims, a.opts.diffusion_steps
        table = a.s2mel_table()
        g = torch.Generator(device="cpu").manual_seed(3)

        def item(frames, prompt, seed):
            return (torch.randn(1, frames, d.dit_dim, generator=g).to(a.device),
                    torch.randn(1, d.n_mels, prompt, generator=g).to(a.device),
                    torch.randn(1, d.style_dim, generator=g).to(a.device), seed)

        def rows(batch):
            return [batching.S2MelRow(None, bench_host.FlowRow(s2, *it), it[0].shape[1]) for it in batch]

        def check(what, got_mels, batch):
            for i, (got, it) in enumerate(zip(got_mels, batch)):
                want, = s2.inference_batch([it], steps)
                self.assertEqual(got.shape, want.shape)
                err = float((got - want).abs().max() / want.abs().max())
                self.assertLess(err, 1e-4, f"{what}: line {i} of {len(got_mels)}: {err}")

        with torch.inference_mode():
            for batch in ([item(300, 120, 1), item(410, 120, 2), item(250, 90, 3)], [item(900, 200, 4)],
                          [item(5000, 200, 5), item(4000, 100, 6)],
                          [item(600, 120, 10 + i) for i in range(5)],  # 5 lines in a bucket of 6
                          [item(9000, 200, 7 + i) for i in range(8)]):  # past the first buffers: new ones
                check("group", table.run(rows(batch)), batch)
                graphs = len(table.graphs)  # before another bucket adds its own
                self.assertEqual(table.graph_bytes, 0, "a bucket that captured counts its temporaries as allocated")
                check("again", table.run(rows(batch)), batch)
                self.assertGreater(table.graph_bytes, 0, "a replay counts the graph's memory")
            self.assertEqual(graphs, 1, "the new buffers dropped the graphs that read the old")
            # Rows joining at other rows' steps, seated again as the bucket grows.
            batch = [item(700, 100, 40), item(350, 100, 41), item(600, 120, 42), item(300, 90, 43)]
            seated, mels, pending = [], {}, rows(batch)
            order = list(pending)
            first = pending.pop()
            while pending or seated:
                if pending:
                    seated.append(pending.pop(0))
                if len(seated) == 2 and first.done == 0:  # set aside at their steps
                    table.set_aside(seated)
                    mels[id(first)], = table.run([first])
                table.step(seated)
                for r in seated:
                    if r.done == steps:
                        mels[id(r)] = table.mel_of(r)
                seated = [r for r in seated if r.done < steps]
            check("rolling", [mels[id(r)] for r in order], batch)
        table.reset()


HAS_TRITON = importlib.util.find_spec("triton") is not None


@unittest.skipUnless(HAS_TORCH and DEVICE == "cuda", "the flow's graphs need CUDA (BATCHING_TEST_DEVICE=cuda)")
class CompiledStagesTest(HostCase, unittest.TestCase):
    """s2mel's estimator and the vocoder under torch.compile (a class of its own: the
    compiles take a minute or two)."""

    def test_compiled_s2mel_and_vocoder_give_the_eager_audio(self):
        """--s2mel-compile and --vocoder-compile change how the kernels are fused, not
        what they compute: the same lines, joining a running batch, give the tokens of
        a host without them and audio within 2 LSB, the flow's graphs replaying the
        compiled estimator (each captured after a step for real)."""
        import torch

        if not hasattr(torch, "compile"):
            self.skipTest("torch.compile needs PyTorch 2")
        compiled = self.make_host("--s2mel-graphs", "--s2mel-compile", "--vocoder-compile")
        plain = self.make_host("--s2mel-graphs")
        self.assertIn("estimator", vars(compiled.adapter.backend.s2mel), "the compiled estimator replaces the method")
        self.assertNotIn("estimator", vars(plain.adapter.backend.s2mel))
        from torch._dynamo.utils import counters

        compiled_frames = counters["frames"]["ok"]
        got, got_paths = self.render(compiled, "c-")
        a, d = compiled.adapter, compiled.adapter.backend.dims
        with torch.inference_mode():
            for n, frames in ((1, 40), (3, 90), (5, 200)):  # groups of any size and length
                a.vocoder_batch([torch.zeros(1, d.n_mels, frames, device=a.device)] * n)
        self.assertEqual(counters["frames"]["ok"], compiled_frames,
                         "what load compiled serves every group: nothing compiles again in service")
        want, want_paths = self.render(plain, "p-")
        for g, w in zip(got, want):
            self.assertEqual(g["codes"], w["codes"])
        self.assertGreater(len(compiled.batcher.lanes[0].table.graphs), 1, "several buckets captured")
        self.assert_audio_close(got_paths, want_paths, "compiled")


@unittest.skipUnless(HAS_TORCH and HAS_TRITON and DEVICE == "cuda",
                     "the paged kernel needs CUDA and Triton (BATCHING_TEST_DEVICE=cuda)")
class PagedAttentionTest(HostCase, unittest.TestCase):
    """paged_attention.decode gives what gathering each row's blocks and running
    scaled dot-product attention gives, and a row's result does not depend on the
    other rows or the table's width."""

    def pool_and_rows(self, dtype, k, heads=4, hd=64, seed=0):
        import torch

        g = torch.Generator().manual_seed(seed)
        bt = 32
        kc = torch.randn(40, bt, heads, hd, generator=g).to("cuda", dtype)
        vc = torch.randn(40, bt, heads, hd, generator=g).to("cuda", dtype)
        # Rows of 0 (a padded row), 1, 31, 32, 33, 100 and 250 cached tokens; rows 2 and
        # 3 share their first block, as beams share their prompt's.
        lengths = [0, 1, 31, 32, 33, 100, 250]
        tables, free = [], list(range(39, 0, -1))
        for n in lengths:
            tables.append([free.pop() for _ in range((n + k + bt - 1) // bt)])
        tables[3][0] = tables[2][0]
        width = max(len(t) for t in tables) + 2  # padded, as a graph bucket pads it
        table = torch.tensor([t + [0] * (width - len(t)) for t in tables], device="cuda")
        q = torch.randn(len(lengths), heads, k, hd, generator=g).to("cuda", dtype)
        return q, kc, vc, table, torch.tensor(lengths, device="cuda")

    def reference(self, q, kc, vc, table, lengths):
        import torch
        import torch.nn.functional as F

        n, heads, k, hd = q.shape
        s = table.shape[1] * kc.shape[1]
        kg = kc[table].view(n, s, heads, hd).transpose(1, 2).float()
        vg = vc[table].view(n, s, heads, hd).transpose(1, 2).float()
        pos = lengths[:, None] + torch.arange(k, device="cuda")
        mask = (torch.arange(s, device="cuda")[None, None, :] <= pos[:, :, None])[:, None]
        return F.scaled_dot_product_attention(q.float(), kg, vg, attn_mask=mask)

    def test_the_kernel_gives_what_the_gather_gives(self):
        import torch

        import paged_attention

        for dtype, tol in ((torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 2e-2)):
            for k in (1, 4):
                q, kc, vc, table, lengths = self.pool_and_rows(dtype, k)
                got = paged_attention.decode(q, kc, vc, table, lengths).float()
                want = self.reference(q, kc, vc, table, lengths)
                err = (got - want).abs().max().item()
                self.assertLess(err, tol, f"{dtype}, {k} new tokens a row: largest difference {err}")

    def test_a_row_gives_the_same_bits_alone_and_in_a_batch(self):
        import torch

        import paged_attention

        q, kc, vc, table, lengths = self.pool_and_rows(torch.float16, 4)
        batch = paged_attention.decode(q, kc, vc, table, lengths)
        for r in range(q.shape[0]):
            used = max(1, (int(lengths[r]) + 4 + 31) // 32)
            alone = paged_attention.decode(q[r:r + 1], kc, vc, table[r:r + 1, :used], lengths[r:r + 1])
            self.assertTrue(torch.equal(alone, batch[r:r + 1]), f"row {r}")

    def test_check_passes_here_and_names_what_it_cannot_serve(self):
        import torch

        import paged_attention

        cuda = torch.device("cuda")
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            self.assertIsNone(paged_attention.check(cuda, 32, 4, 64, dtype, 4), dtype)
        self.assertIn("head size 80", paged_attention.check(cuda, 32, 4, 80, torch.float16, 4))
        self.assertEqual(paged_attention.check(torch.device("cpu"), 32, 4, 64, torch.float32, 4), "not on CUDA")
        self.assertEqual(self.make_host().batcher.snapshot()["paged_attention_off"], "")

    def test_hosts_with_and_without_the_kernel_make_the_same_tokens(self):
        """fp32 greedy, lines joining a running batch: the kernel (IEEE products) and
        the gather give the same codes."""
        paged = self.make_host("--greedy", beams=1)
        gather = self.make_host("--greedy", "--no-paged-attention", beams=1)
        self.assertTrue(paged.batcher.snapshot()["paged_attention"])
        self.assertFalse(gather.batcher.snapshot()["paged_attention"])
        got, _ = self.render(paged, "p-")
        want, _ = self.render(gather, "q-")
        for g, w in zip(got, want):
            self.assertEqual(g["codes"], w["codes"])


@unittest.skipUnless(HAS_TORCH, "needs torch")
class SMPartitionTest(HostCase, unittest.TestCase):
    """--s2mel-sms: s2mel and the vocoder on a green context of part of the SMs."""

    def test_a_partition_needs_a_cuda_device_and_a_share_of_it(self):
        import sm_partition
        import torch

        with self.assertRaisesRegex(RuntimeError, "CUDA device"):
            sm_partition.streams(torch.device("cpu"), 16, 2)
        if DEVICE == "cuda":
            total = torch.cuda.get_device_properties(0).multi_processor_count
            for sms in (0, total):
                with self.assertRaisesRegex(RuntimeError, f"device's {total}"):
                    sm_partition.streams(torch.device("cuda"), sms, 2)

    @unittest.skipUnless(DEVICE == "cuda", "green contexts need CUDA (BATCHING_TEST_DEVICE=cuda)")
    def test_a_partitioned_host_makes_what_a_shared_one_makes(self):
        """fp32 greedy, lines joining a running batch, s2mel as graphs and eager: the
        same tokens and the same audio with s2mel on 16 SMs as on all of them, and the
        host says how many SMs it holds."""
        for graphs in ("--s2mel-graphs", "--no-s2mel-graphs"):
            part = self.make_host("--greedy", graphs, "--s2mel-sms", "16", beams=1)
            whole = self.make_host("--greedy", graphs, beams=1)
            snap = part.batcher.snapshot()
            self.assertEqual(snap["s2mel_sms_off"], "", "a green context on this GPU")
            self.assertEqual(snap["s2mel_sms"], 16)
            self.assertEqual(whole.batcher.snapshot()["s2mel_sms"], 0)
            got, got_paths = self.render(part, "sm-")
            want, want_paths = self.render(whole, "all-")
            for g, w in zip(got, want):
                self.assertEqual(g["codes"], w["codes"], graphs)
            self.assert_audio_close(got_paths, want_paths, str(graphs))


class DecodeBucketsTest(unittest.TestCase):
    """The decode graphs' buckets (batching.decode_buckets), without CUDA."""

    def test_buckets_cover_every_step_the_host_can_make(self):
        import batching

        rows, widths, keys = batching.decode_buckets(64, 3, 2400, 100_000)
        self.assertEqual(rows, [3, 6, 12, 18, 24, 36, 48, 72, 96, 144, 192])  # whole sequences of 3 beams
        self.assertEqual(widths[:3], [4, 8, 12])
        self.assertEqual(widths[-2:], [72, 75])  # 2400 positions: 75 blocks
        self.assertEqual(len(keys), len(rows) * len(widths))
        self.assertEqual(batching.decode_buckets(10, 3, 2400, 100_000)[0][-2:], [24, 36])  # the first past 10 lines
        self.assertEqual(batching.decode_buckets(300, 3, 2400, 100_000)[0][-2:], [768, 900])  # past the largest: itself
        self.assertEqual(batching.decode_buckets(16, 1, 2400, 100_000)[0], [1, 2, 4, 6, 8, 12, 16])  # one beam
        for n in range(1, 65):
            self.assertGreaterEqual(batching.bucket_up(3 * n, rows), 3 * n)
            self.assertEqual(batching.bucket_up(3 * n, rows) % 3, 0)
        self.assertIsNone(batching.bucket_up(193, rows))

    def test_a_small_pool_leaves_the_largest_buckets_eager(self):
        import batching

        rows, widths, keys = batching.decode_buckets(64, 3, 2400, 2000)
        self.assertTrue(all(r * w <= 2000 for r, w in keys))
        self.assertIn((192, 8), keys)
        self.assertNotIn((192, 12), keys)  # 2,304 blocks
        self.assertIn((24, 75), keys)
        self.assertLess(len(keys), len(rows) * len(widths))


def next_group(ready, now, size, max_wait, waste):
    import batching

    group = batching.group_of(ready, now, size, max_wait, waste)
    batching.take(ready, group)
    return group


class NextGroupTest(unittest.TestCase):
    """The s2mel stage's choice of the next group (batching.group_of) and the
    vocoder's batches within a group (batching.vocoder_batches), on plain lines."""

    @staticmethod
    def lines(*spec):
        import types

        return [types.SimpleNamespace(name=n, frames=f, ready_at=t, sequences=[0], first=n.startswith("first"))
                for n, f, t in spec]

    def test_fewest_frames_first_with_companions_of_similar_frames(self):
        import batching

        ready = self.lines(("long", 2000, 0.0), ("a", 900, 0.1), ("b", 800, 0.2), ("c", 1150, 0.3), ("d", 820, 0.4),
                           ("e", 1700, 0.5))
        group = next_group(ready, now=1.0, size=3, max_wait=5.0, waste=0.5)
        self.assertEqual([ln.name for ln in group], ["b", "d", "a"])  # the fewest, then nearest in frames
        self.assertEqual(sorted(ln.name for ln in ready), ["c", "e", "long"])
        group = next_group(ready, now=1.0, size=3, max_wait=5.0, waste=0.5)
        self.assertEqual([ln.name for ln in group], ["c", "e"])  # 2000 frames are more than 1.5 x 1150
        self.assertEqual([ln.name for ln in next_group(ready, 1.0, 3, 5.0, 0.5)], ["long"])
        self.assertEqual(ready, [])

    def test_lines_join_the_table_while_every_waiting_line_fits(self):
        import batching

        seated = self.lines(("s1", 1000, 0.0), ("s2", 1100, 0.0))
        ready = self.lines(("a", 1200, 0.3), ("b", 900, 0.2), ("c", 1000, 0.1))
        self.assertEqual([ln.name for ln in batching.joiners(ready, seated, room=2, waste=0.5)], ["b", "c"])
        self.assertEqual([ln.name for ln in batching.joiners(ready, seated, room=8, waste=0.5)], ["b", "c", "a"])
        self.assertEqual(batching.joiners(ready, seated, room=8, waste=0.25), [],
                         "1,200 frames beside 900 pass 1.25x: nobody joins, the table drains")
        ready.append(self.lines(("long", 3000, 0.0))[0])
        self.assertEqual(batching.joiners(ready, seated, room=8, waste=0.5), [], "a line that does not fit waits")

    def test_the_waste_is_the_padding_a_group_may_carry(self):
        import batching

        spec = (("a", 1000, 0.0), ("b", 1400, 0.1), ("c", 1900, 0.2))
        self.assertEqual([ln.name for ln in next_group(self.lines(*spec), 1.0, 8, 5.0, 0.0)], ["a"])
        self.assertEqual([ln.name for ln in next_group(self.lines(*spec), 1.0, 8, 5.0, 0.5)], ["a", "b"])
        self.assertEqual([ln.name for ln in next_group(self.lines(*spec), 1.0, 8, 5.0, 1.0)], ["a", "b", "c"])

    def test_a_line_that_waited_long_goes_first(self):
        import batching

        ready = self.lines(("long", 2000, 0.0), ("short", 100, 5.5), ("mid", 1500, 5.6))
        group = next_group(ready, now=6.0, size=4, max_wait=5.0, waste=0.5)
        self.assertEqual([ln.name for ln in group], ["long", "mid"])
        self.assertEqual([ln.name for ln in ready], ["short"])

    def test_a_first_line_leads_with_first_lines_only(self):
        ready = self.lines(("overdue", 2000, 0.0), ("short", 100, 5.5), ("first-b", 1500, 5.8), ("mid", 1450, 5.6),
                           ("first-a", 1400, 5.7), ("first-far", 4000, 5.9))
        group = next_group(ready, now=6.0, size=4, max_wait=5.0, waste=0.5)
        self.assertEqual([ln.name for ln in group], ["first-a", "first-b"],
                         "the first ready longest leads, before the line overdue; 1,450 frames fit but are not first")
        self.assertEqual([ln.name for ln in next_group(ready, 6.0, 4, 5.0, 0.5)], ["first-far"])
        self.assertEqual([ln.name for ln in next_group(ready, 6.0, 4, 5.0, 0.5)], ["overdue", "mid"])

    def test_while_a_first_line_waits_only_first_lines_join(self):
        import batching

        seated = self.lines(("s1", 1000, 0.0))
        ready = self.lines(("b", 900, 0.1), ("first", 1100, 0.2))
        self.assertEqual([ln.name for ln in batching.joiners(ready, seated, room=8, waste=0.5)], ["first"])
        ready = self.lines(("b", 900, 0.1), ("first", 3000, 0.2))
        self.assertEqual(batching.joiners(ready, seated, room=8, waste=0.5), [],
                         "the first does not fit: nobody joins, the table drains and it leads the next group")

    def test_the_vocoder_runs_lines_of_about_one_length_together_the_shortest_first(self):
        import batching

        frames = [300, 100, 110, 500, 120, 124]
        self.assertEqual(batching.vocoder_batches(frames, size=3, waste=0.25), [[1, 2, 4], [5], [0], [3]])
        self.assertEqual(batching.vocoder_batches(frames, size=8, waste=0.25), [[1, 2, 4, 5], [0], [3]])
        self.assertEqual(batching.vocoder_batches(frames, size=8, waste=0.0), [[1], [2], [4], [5], [0], [3]])
        self.assertEqual(batching.vocoder_batches([], size=8), [])


@unittest.skipUnless(HAS_TORCH, "needs torch")
class S2MelLoopTest(unittest.TestCase):
    """The s2mel thread (Batcher._s2mel_loop) over a table whose flow adds each row's
    step length to x, so that a row's mel is 1 wherever its steps ran in whatever
    company, and that records the rows of each step: with s2mel_rolling a line whose
    GPT ends while another is in s2mel joins at the next step; without, it waits for
    the group; s2mel_batch bounds the lines in the table; a line whose rows fail, or a
    step that fails, fails its lines and the thread goes on."""
    # Lines of about one length (within s2mel_waste) join the table; 3000 and 900
    # frames do not, so two_lines' second line is made to fit.

    STEPS = 4

    @classmethod
    def table(cls, log, gates, refused=(), broken=()):
        import torch

        import batching

        class Row:
            def __init__(self, seed, frames):
                self.seed, self.frames, self.prompt = seed, frames, 0
                self.x = torch.full((1, 1, frames), float(seed))

        class Table(batching.S2MelTable):
            def rows(self, items):
                if items[0][3] in refused:
                    raise RuntimeError("CUDA out of memory (the test's)")
                return [Row(seed, c["frames"]) for c, _, _, seed in items]

            def blank(self, b, t):
                return (torch.zeros(b, 1, t),)

            def put(self, inputs, i, row):
                inputs[0][i].zero_()
                inputs[0][i, :, :row.frames] = row.x[0]

            def clear(self, inputs, i):
                inputs[0][i].zero_()

            def x_of(self, inputs, i, row):
                return inputs[0][i:i + 1, :, :row.frames].clone()

            def flow(self, inputs, t, dt):
                return inputs[0] + dt[:, None, None]

            def mel(self, x, row):
                return x

            def step(self, rows):
                now = [(r.data.seed, r.done) for r in rows]
                log.append(now)
                if any(k in broken for k in now):
                    raise RuntimeError("CUDA out of memory (the test's step)")
                super().step(rows)
                for k in now:  # the step waits here
                    if k in gates:
                        gates[k].wait(10)

        return Table(cls.STEPS, torch.device("cpu"))

    class Adapter:
        def __init__(self, table):
            import torch

            self.device, self.t = torch.device("cpu"), table

        def latents_batch(self, items):
            return [None] * len(items)

        def s2mel_table(self):
            return self.t

        def vocoder_batch(self, mels):
            return mels

    def start(self, rolling, gates=None, refused=(), broken=(), s2mel_batch=16, express=False):
        """A Batcher's s2mel threads over the test's tables, one per lane (with express,
        an express lane beside the other), their steps in one log."""
        import batching
        import protocol

        self.log, self.gates = [], gates or {}
        table = self.table(self.log, self.gates, refused, broken)
        b = batching.Batcher(self.Adapter(table), protocol.Meter(), max_sequences=8, beams=1, kv_cache_bytes=0,
                             s2mel_batch=s2mel_batch, s2mel_rolling=rolling, s2mel_express=1.0 if express else 0.0)
        b.lanes = [batching.S2MelLane(False, table)]
        if express:
            b.lanes.append(batching.S2MelLane(True, self.table(self.log, self.gates, refused, broken)))
        for lane in b.lanes:
            threading.Thread(target=b._s2mel_loop, args=(lane,), daemon=True).start()
        return b

    def ready(self, b, seed, frames, first=False, express=False):
        import types

        import batching

        ln = batching.Line(req=types.SimpleNamespace(seed=seed), cond={"frames": frames}, first=first,
                           express=express)
        ln.sequences = [batching.Sequence(line=ln, index=0, text_tokens=None, limit=0)]
        ln.frames, ln.ready_at = frames, time.perf_counter()
        with b.ready_cv:
            b.ready.append(ln)
            b.ready_cv.notify_all()
        return ln

    def wait_for(self, key):
        deadline = time.monotonic() + 10
        while not any(key in s for s in self.log) and time.monotonic() < deadline:
            time.sleep(0.001)

    def ended(self, b, n):
        """The seeds of n lines in the order the vocoder got them, each checked: its mel
        is its seed + 1 on every frame (it began at its seed, and every step ran once,
        at its own time, in its own slot)."""
        import torch

        out = []
        while len(out) < n:  # a vocoder batch may hold several lines
            lines, wavs, _, _ = b.vocoded.get(timeout=10)
            for ln, w in zip(lines, wavs):
                self.assertTrue(torch.allclose(w, torch.full_like(w, ln.req.seed + 1.0)), (ln.req.seed, w))
                self.assertEqual(w.shape[-1], ln.frames)
                out.append(ln.req.seed)
        return out

    def two_lines(self, rolling):
        """A long line in s2mel, held at its first step while a short one gets ready."""
        b = self.start(rolling, {(100, 0): threading.Event()})
        self.ready(b, 100, 1000)
        self.wait_for((100, 0))
        self.ready(b, 200, 900)
        time.sleep(0.05)
        self.gates[100, 0].set()
        return b

    def test_a_line_joins_at_the_next_step(self):
        b = self.two_lines(True)
        self.assertEqual(self.ended(b, 2), [100, 200])
        self.assertEqual(self.log, [[(100, 0)], [(100, 1), (200, 0)], [(100, 2), (200, 1)], [(100, 3), (200, 2)],
                                    [(200, 3)]])

    def test_without_rolling_a_line_waits_for_the_group(self):
        b = self.two_lines(False)
        self.assertEqual(self.ended(b, 2), [100, 200])
        self.assertEqual(self.log, [[(100, i)] for i in range(4)] + [[(200, i)] for i in range(4)])

    def test_the_table_holds_at_most_s2mel_batch_lines(self):
        b = self.start(True, {(100, 0): threading.Event()}, s2mel_batch=2)
        self.ready(b, 100, 1000)
        self.wait_for((100, 0))
        for seed in (200, 300):
            self.ready(b, seed, 900)
        time.sleep(0.05)
        self.gates[100, 0].set()
        self.assertEqual(sorted(self.ended(b, 3)), [100, 200, 300])
        self.assertEqual(max(len(s) for s in self.log), 2)
        self.assertEqual(self.log[1], [(100, 1), (200, 0)], "the shortest waiting joins first")

    def test_a_line_that_does_not_fit_waits_for_the_table_to_drain(self):
        b = self.start(True, {(100, 0): threading.Event()})
        self.ready(b, 100, 1000)
        self.wait_for((100, 0))
        self.ready(b, 200, 3000)
        self.ready(b, 300, 950)
        time.sleep(0.05)
        self.gates[100, 0].set()
        self.assertEqual(self.ended(b, 3), [100, 300, 200])
        self.assertEqual(self.log[:4], [[(100, i)] for i in range(4)], "nobody joined while 3,000 frames waited")
        self.assertEqual(self.log[4], [(300, 0)], "then the fewest frames lead the next group")

    def test_lines_joining_and_leaving_keep_their_own_slots(self):
        """A stream of lines, each joining as others leave (rows made and dropped: a
        slot is the row's, never a row gone's with the same id)."""
        import gc

        b = self.start(True, s2mel_batch=3)
        for k in range(12):
            self.ready(b, 10 + k, 900 + 10 * (k % 4))
            gc.collect()
            time.sleep(0.003)
        self.assertEqual(sorted(self.ended(b, 12)), [10 + k for k in range(12)])

    def test_a_first_line_sets_the_group_in_s2mel_aside(self):
        """The group in s2mel is set aside at its step while a first line runs its
        steps, then goes on where it left off (its mels right: each row's x kept), before
        the lines that waited."""
        for rolling in (False, True):
            with self.subTest(rolling=rolling):
                b = self.start(rolling, {(100, 1): threading.Event()})
                self.ready(b, 100, 1000)
                self.wait_for((100, 1))
                self.ready(b, 200, 2000)
                self.ready(b, 300, 950, first=True)
                time.sleep(0.05)
                self.gates[100, 1].set()
                self.assertEqual(self.ended(b, 3), [300, 100, 200])
                self.assertEqual(self.log, [[(100, 0)], [(100, 1)]] + [[(300, i)] for i in range(4)] +
                                 [[(100, 2)], [(100, 3)]] + [[(200, i)] for i in range(4)])
                self.assertEqual(b.stats["s2mel_set_aside"], 1)

    def test_an_express_line_runs_beside_the_group(self):
        """A line of the express lane runs its steps while the other lane's group is
        held at a step, sets nothing aside, and the group goes on after."""
        b = self.start(False, {(100, 1): threading.Event()}, express=True)
        self.ready(b, 100, 1000)
        self.wait_for((100, 1))
        self.ready(b, 200, 950, express=True)
        self.assertEqual(self.ended(b, 1), [200])
        self.gates[100, 1].set()
        self.assertEqual(self.ended(b, 1), [100])
        self.assertEqual([k for s in self.log for k in s if k[0] == 100], [(100, i) for i in range(4)])
        self.assertEqual(b.stats["s2mel_set_aside"], 0)

    def test_a_line_whose_rows_fail_fails_alone(self):
        b = self.start(True, {(100, 0): threading.Event()}, refused=(200,))
        self.ready(b, 100, 1000)
        self.wait_for((100, 0))
        refused = self.ready(b, 200, 900)
        time.sleep(0.05)
        self.gates[100, 0].set()
        self.assertEqual(self.ended(b, 1), [100])
        self.assertTrue(refused.done.is_set())
        self.assertIn("out of memory", str(refused.error))
        self.assertEqual(b.stats["in_s2mel"], -1, "counted out once (the test never counted it in)")

    def test_a_failed_step_fails_its_lines_and_the_next_line_runs(self):
        b = self.start(True, broken=((100, 2),))
        first = self.ready(b, 100, 3000)
        self.assertTrue(first.done.wait(10))
        self.assertIn("out of memory", str(first.error))
        self.ready(b, 200, 900)
        self.assertEqual(self.ended(b, 1), [200])
        self.assertEqual(self.log[-4:], [[(200, i)] for i in range(4)])


@unittest.skipUnless(HAS_TORCH, "needs torch")
class SwitchIntervalTest(unittest.TestCase):
    def test_the_host_sets_the_switch_interval_not_the_batcher(self):
        """The GIL switch interval is the process's: the host sets it as it loads, and
        a Batcher started by any other code leaves it as it was."""
        import sys

        import batching

        host = HostCase.make_host(None)
        self.assertAlmostEqual(sys.getswitchinterval(), batching.SWITCH_INTERVAL)
        sys.setswitchinterval(0.005)
        try:
            args = dict(host.batcher_args, kv_cache_bytes=host.adapter.default_kv_cache_bytes())
            batching.Batcher(host.adapter, host.meter, **args).start()
            self.assertAlmostEqual(sys.getswitchinterval(), 0.005)
        finally:
            sys.setswitchinterval(batching.SWITCH_INTERVAL)


if __name__ == "__main__":
    unittest.main()
