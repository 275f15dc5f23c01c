"""The IndexTTS-2 batching adapter (indextts_batching.py) through the batching core, on
the stand-ins of IndexTTS2's own modules (testdata/standin/indextts/_modules.py) in fp32
on the CPU: a line decoded in a batch, with lines of other lengths joining and leaving,
gives the same mel codes as alone, greedy and with 3 beams; greedy codes equal the
stand-in UnifiedVoice's own decode (a full forward per token, no cache); the batched
latents and s2mel equal UnifiedVoice.forward's and the CFM's own solver's; the host
answers protocol 2 over HTTP end to end; bad input and a line too long for the KV cache
are refused and change nothing. Skipped without torch (Debian's python3-torch is
enough)."""

import array
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
import wave

HAS_TORCH = importlib.util.find_spec("torch") is not None
DEVICE = os.environ.get("BATCHING_TEST_DEVICE", "cpu")
HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(HERE, "testdata", "standin")
MODEL = os.path.join(HERE, "testdata", "standin-model")

if HAS_TORCH:
    import torch  # noqa: F401 (real torch first: the stand-in directory also holds a torch shim)

    if STANDIN not in sys.path:
        sys.path.append(STANDIN)  # after site-packages: its indextts and torchaudio, never its torch


def write_ref(path, seconds=3.0, freq=0.05):
    import math
    import struct

    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i * freq))) for i in range(int(16000 * seconds))))


def pcm(path):
    with wave.open(path) as w:
        return array.array("h", w.readframes(w.getnframes()))


TEXTS = ["The ship sails at dawn.", "Wait for me!", "Nobody told me the river had risen so high this spring.",
         "Hold the line.", "I never said that, and you know it."]


@unittest.skipUnless(HAS_TORCH, "needs torch")
class IndexTTSAdapterTest(unittest.TestCase):
    def make_host(self, *extra, beams=3, kv=0, max_sequences=8, variant="2"):
        import indextts_batching
        import indextts_host

        args = ["--port", "0", "--batch", "--model-dir", os.path.join(MODEL, variant), "--variant", variant,
                "--device", DEVICE, "--beams", str(beams),
                "--max-sequences", str(max_sequences),
                "--diffusion-steps", "3", "--return-codes", *extra]
        if kv or DEVICE == "cuda":  # on CUDA a host would otherwise take 40% of the free memory
            args += ["--kv-cache-bytes", str(kv or 256 << 20)]
        host = indextts_batching.batching_host(indextts_host.parse_args(args))
        host.load()
        return host

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.ref = os.path.join(self.tmp.name, "ref.wav")
        write_ref(self.ref)

    def tearDown(self):
        self.tmp.cleanup()

    def body(self, name, text, max_mel, seed=7, **kw):
        return {"text": text, "max_mel_tokens": max_mel, "seed": seed, "language": "en",
                "speaker": {"reference_audio_path": self.ref},
                "output_path": os.path.join(self.tmp.name, name + ".wav"), **kw}

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

    def assert_pool_empty(self, host):
        pool = host.batcher.pool
        deadline = time.monotonic() + 5
        while len(pool.free) != pool.n_blocks - 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(len(pool.free), pool.n_blocks - 1, "every KV block is back")
        self.assertEqual(pool.promised, {})

    def check_same_tokens(self, beams, *extra):
        host = self.make_host(*extra, beams=beams)
        target = self.body("target", TEXTS[0], 30)
        alone = self.synth(host, target)["codes"]
        others = [self.body(f"o{i}", TEXTS[i + 1], n, seed=i) for i, n in enumerate((8, 60, 16, 45))]
        bodies = [others[0], others[1], target, others[2], others[3]]
        batched = self.run_staggered(host, bodies)
        self.assertEqual(batched[2]["codes"], alone, f"beams {beams}: batched == alone")
        lengths = {len(r["codes"][0]) for r in batched}
        self.assertGreater(len(lengths), 2, f"the lines were of different lengths: {lengths}")
        self.assertGreater(host.batcher.stats["batch_rows_max"], beams, "lines really shared a batch")
        self.assertGreater(batched[2]["sequence"]["batch_rows_mean"], beams, "the target decoded beside others")
        self.assert_pool_empty(host)
        return host, alone

    def test_batched_equals_alone_greedy_and_equals_unified_voice(self):
        host, alone = self.check_same_tokens(1, "--greedy")
        # ... and equals the stand-in UnifiedVoice's own greedy decode, which runs the whole
        # sequence through its GPT-2 at every token (no KV cache, no paging).
        import protocol
        import torch

        a = host.adapter
        req = protocol.parse_synthesis(self.body("target", TEXTS[0], 30))
        with torch.inference_mode():
            (text, limit, _), = a.segments(req)
            spk = a.audio[self.ref]["spk_cond"]
            emo = a.emo[self.ref]
            lens = torch.tensor([spk.shape[-1]])
            emovec = a.gpt.merge_emovec(spk, emo, lens, lens, alpha=1.0)
            # The class's own method: the host wraps the instance's (its max_mel_tokens warning).
            codes, _ = type(a.gpt).inference_speech(a.gpt, spk, text, None, emo_speech_condition=emo, cond_lengths=lens,
                                              emo_cond_lengths=lens, emo_vec=emovec, do_sample=False, num_beams=1,
                                              repetition_penalty=10.0, max_generate_length=limit)
        self.assertEqual([codes[0].tolist()], alone)

    def test_batched_equals_alone_beam_search(self):
        self.check_same_tokens(beams=3)

    def test_sampled_batched_equals_alone_and_follows_the_seed(self):
        """One beam samples by default (top-k 30, top-p 0.8, temperature 0.8, as
        IndexTTS2.infer): the same draw alone and in a batch others join and leave; another
        seed, another draw; the greedy choice is not what it draws; every token is in the
        top 30 of its row's penalised logits."""
        import torch

        import batching

        draws = []
        real = batching.sample_tokens

        def record(logits, keys, top_k, top_p, temperature):
            tok = real(logits, keys, top_k, top_p, temperature)
            if not (logits.is_cuda and torch.cuda.is_current_stream_capturing()):  # a graph's capture: no draw yet
                draws.append((logits.topk(top_k, dim=-1).indices, tok, top_k))
            return tok

        batching.sample_tokens = record
        self.addCleanup(setattr, batching, "sample_tokens", real)
        host, alone = self.check_same_tokens(1)
        self.assertEqual(host.batcher.snapshot()["decode"], "sample")
        # Every step eager (on CUDA the steps above replay graphs): the same draw, each one seen.
        eager = self.synth(self.make_host("--no-decode-graphs", beams=1), self.body("target", TEXTS[0], 30))
        self.assertEqual(eager["codes"], alone, "graphs draw what eager steps draw")
        other = self.synth(host, self.body("seed8", TEXTS[0], 30, seed=8))["codes"]
        self.assertNotEqual(other, alone, "another seed, another draw")
        greedy = self.synth(self.make_host("--greedy", beams=1), self.body("greedy", TEXTS[0], 30))["codes"]
        self.assertNotEqual(greedy, alone)
        self.assertTrue(draws)
        for top, tok, k in draws:
            self.assertEqual(k, 30)
            for r in range(tok.shape[0]):
                self.assertIn(int(tok[r]), top[r].tolist(), "never outside the top k")

    def three_lines(self, a, name):
        """Three lines of 12, 30 and 5 random codes: (conditioning, text tokens, codes)."""
        import protocol
        import torch

        items = []
        for i, (text, n) in enumerate(((TEXTS[0], 12), (TEXTS[2], 30), (TEXTS[3], 5))):
            req = protocol.parse_synthesis(self.body(f"{name}{i}", text, n))
            (tokens, _, _), = a.segments(req)
            items.append((a.conditioning(req), tokens, torch.randint(0, 8000, (1, n))))
        return items

    @unittest.skipIf(DEVICE == "cuda", "builds its codes on the CPU")
    def test_latents_and_s2mel_match_the_modules_own_paths(self):
        """latents_batch: UnifiedVoice.forward's latents, alone and padded in a batch;
        one line through the adapter's CFMTable: the CFM's own inference under the same
        noise."""
        import batching
        import torch

        host = self.make_host(beams=1)
        a = host.adapter
        with torch.inference_mode():
            items = self.three_lines(a, "l")
            batched = a.latents_batch(items)
            spk, emo = a.audio[self.ref]["spk_cond"], a.emo[self.ref]
            lens = torch.tensor([spk.shape[-1]])
            emovec = a.gpt.merge_emovec(spk, emo, lens, lens, alpha=1.0)
            latent = a.gpt.get_conditioning(spk.transpose(1, 2), lens)
            for (cond, tokens, codes), got in zip(items, batched):
                want = a.gpt(latent, tokens, torch.tensor([tokens.shape[1]]), codes, torch.tensor([codes.shape[1]]),
                             emo, emo_vec=emovec)
                self.assertEqual(tuple(got.shape), tuple(want.shape))
                self.assertTrue(torch.allclose(got, want, atol=1e-5), (got - want).abs().max())
                self.assertTrue(torch.allclose(a.latents_batch([(cond, tokens, codes)])[0], want, atol=1e-5))

            cond, tokens, codes = items[1]
            table = a.s2mel_table()
            mel, = table.run([batching.S2MelRow(None, r, r.frames)
                                for r in table.rows([(cond, batched[1], codes, 1234)])])
            models = a.tts.s2mel.models
            s = a.tts.semantic_codec.quantizer.vq2emb(codes.unsqueeze(1)).transpose(1, 2) + models["gpt_layer"](
                batched[1])
            target = models["length_regulator"](s, ylens=torch.LongTensor([int(codes.shape[1] * 1.72)]),
                                                n_quantizers=3, f0=None)[0]
            mu = torch.cat([cond["prompt_condition"], target], dim=1)
            torch.manual_seed(1234)
            want = models["cfm"].inference(mu, torch.LongTensor([mu.size(1)]), cond["ref_mel"], cond["style"], None, 3,
                                           inference_cfg_rate=0.7)[:, :, cond["ref_mel"].size(-1):]
        self.assertEqual(tuple(mel.shape), tuple(want.shape))
        self.assertTrue(torch.allclose(mel, want, atol=1e-4), (mel - want).abs().max())
        # The frames the s2mel stage groups lines by are those its CFM runs over: the
        # prompt's and the target's, the codes read up to the first stop token.
        tokens = codes[0].tolist()
        self.assertEqual(a.s2mel_frames(cond, tokens), mu.size(1))
        self.assertEqual(a.s2mel_frames(cond, tokens + [a.stop_token, 5, 6]), mu.size(1))

    @unittest.skipIf(DEVICE == "cuda", "builds its codes on the CPU")
    def test_rows_joining_at_their_own_steps_give_their_mels_alone(self):
        """The CFMTable with lines joining at other lines' steps and leaving at their
        own (seated again as the bucket of rows and frames changes), and set aside at
        their steps while a first line runs alone, gives each line the mel it has
        through the table alone."""
        import batching
        import torch

        host = self.make_host(beams=1)
        a = host.adapter
        table = a.s2mel_table()
        with torch.inference_mode():
            items = self.three_lines(a, "r")
            latents = a.latents_batch(items)
            inputs = [(cond, lat, codes, 50 + i) for i, ((cond, _, codes), lat) in enumerate(zip(items, latents))]
            inputs.append((*inputs[0][:3], 99))  # the first line

            def rows():
                return [batching.S2MelRow(None, r, r.frames) for r in table.rows(inputs)]

            alone = [table.run([r])[0] for r in rows()]
            pending, seated, got = rows(), [], {}
            order = list(pending)
            first = pending.pop()
            while pending or seated:
                if pending:
                    seated.append(pending.pop(0))
                if len(seated) == 2 and first.done == 0:  # the rows seated wait at their steps
                    table.set_aside(seated)
                    got[id(first)] = table.run([first])[0]
                table.step(seated)
                for r in seated:
                    if r.done == table.steps:
                        got[id(r)] = table.mel_of(r)
                seated = [r for r in seated if r.done < table.steps]
        for i, (r, want) in enumerate(zip(order, alone)):
            mel = got[id(r)]
            self.assertEqual(tuple(mel.shape), tuple(want.shape))
            self.assertTrue(torch.allclose(mel, want, atol=1e-4), (i, (mel - want).abs().max()))

    @unittest.skipIf(DEVICE == "cuda", "on CUDA cuDNN's TF32 convolutions differ by shape (10 LSB on an H200)")
    def test_audio_batched_and_alone(self):
        """s2mel and the vocoder batched: a line's audio alone and in a group of other
        lengths differs only by rounding (padded frames are masked)."""
        host = self.make_host(beams=1)
        target = self.body("alone", TEXTS[0], 20)
        self.synth(host, target)
        alone = pcm(target["output_path"])
        target = self.body("batched", TEXTS[0], 20)
        bodies = [target, self.body("b1", TEXTS[1], 24, seed=1), self.body("b2", TEXTS[3], 16, seed=2),
                  self.body("b3", TEXTS[4], 22, seed=3)]
        res = self.run_staggered(host, bodies, gap_steps=0)
        self.assertTrue(any(r["sequence"]["s2mel_group"] > 1 for r in res), [r["sequence"] for r in res])
        batched = pcm(target["output_path"])
        self.assertEqual(len(batched), len(alone))
        self.assertGreater(max(abs(x) for x in alone), 100, "the audio is not silence")
        body = len(alone) - 256 * 8
        head = max(abs(x - y) for x, y in zip(alone[:body], batched[:body]))
        self.assertLessEqual(head, 2, f"audio differs before the tail by {head}")

    def test_health_prepare_and_emotion(self):
        host = self.make_host()
        status, h = host.handle("GET", "/health", None)
        self.assertEqual(status, 200, h)
        self.assertEqual(h["protocol"], 2)
        self.assertEqual(h["model"], "IndexTTS-2")
        self.assertTrue(h["batching"])
        gpt = host.adapter.gpt
        self.assertEqual(h["batch"]["kv_bytes_per_token"], len(gpt.gpt.h) * 2 * gpt.model_dim * 4)
        self.assertEqual(h["batch"]["prefix_tokens"], gpt.cond_num + 2 + 3)
        cache = os.path.join(self.tmp.name, "cache")
        status, res = host.handle("POST", "/prepare", {"reference_audio_path": self.ref, "cache_dir": cache})
        self.assertEqual(status, 200, res)
        self.assertTrue(res["computed"])
        self.assertTrue(os.path.isfile(res["cache_path"]))
        # A fresh host restores the speaker from the file instead of computing it.
        other = self.make_host()
        status, again = other.handle("POST", "/prepare", {"reference_audio_path": self.ref, "cache_dir": cache})
        self.assertEqual((status, again["computed"]), (200, False), again)
        plain = self.synth(other, self.body("plain", TEXTS[0], 12))
        emo_ref = os.path.join(self.tmp.name, "angry.wav")
        write_ref(emo_ref, 2.0, freq=0.21)
        by_audio = self.synth(other, self.body("emo", TEXTS[0], 12, emotion={"mode": "audio", "audio_path": emo_ref,
                                                                               "weight": 0.8}))
        vec = [0, 0.9, 0, 0, 0, 0, 0, 0.1]
        by_vector = self.synth(other, self.body("vec", TEXTS[0], 12, emotion={"mode": "vector", "vector": vec}))
        conds = list(other.adapter.conds.values())
        self.assertEqual(len(conds), 3, "one GPT conditioning per speaker and emotion")
        import torch

        for i in range(3):
            for j in range(i):
                self.assertFalse(torch.allclose(conds[i], conds[j]), "the emotion conditions the GPT")
        self.assertEqual(by_audio["tokens"], len(by_audio["codes"][0]))
        self.assertEqual(by_vector["tokens"], len(by_vector["codes"][0]))
        self.assertEqual(self.synth(other, self.body("plain2", TEXTS[0], 12))["codes"], plain["codes"])

    def test_variant_2_5(self):
        """2.5: CAMPPlus conditioning (one latent and two zero rows), 25 tokens a second,
        duration_factor stretching s2mel's frames, a language embedding."""
        host = self.make_host(beams=1, variant="2.5")
        self.assertEqual(host.adapter.prefix_tokens, 1 + 2 + 3)
        one = self.synth(host, self.body("one", TEXTS[0], 20))
        slow = self.synth(host, self.body("slow", TEXTS[0], 20, duration_factor=1.5))
        self.assertEqual(one["codes"], slow["codes"], "duration_factor scales the audio, not the codes")
        n = len(one["codes"][0])
        self.assertAlmostEqual(one["audio_seconds"], int(n * 1.72) * 256 / 22050, places=3)
        self.assertAlmostEqual(slow["audio_seconds"], int(n * 1.72 * 1.5) * 256 / 22050, places=3)
        zh = self.synth(host, self.body("zh", TEXTS[0], 20, language="zh"))
        self.assertNotEqual(zh["codes"], one["codes"], "the language embedding conditions the GPT")

    def test_s2mel_in_bf16(self):
        """--s2mel-dtype bf16: the CFM's estimator in bf16 (the rest of s2mel and BigVGAN
        fp32), the same line's audio as in fp32 up to bf16 rounding, not identical."""
        import torch

        out = {}
        for dtype in ("fp32", "bf16"):
            host = self.make_host("--s2mel-dtype", dtype, "--greedy", beams=1)
            models = host.adapter.tts.s2mel.models
            want = torch.bfloat16 if dtype == "bf16" else torch.float32
            self.assertEqual({p.dtype for p in models["cfm"].estimator.parameters()}, {want})
            for name in ("length_regulator", "gpt_layer"):
                self.assertEqual({p.dtype for p in models[name].parameters()}, {torch.float32}, name)
            self.assertEqual({p.dtype for p in host.adapter.tts.bigvgan.parameters()}, {torch.float32})
            _, h = host.handle("GET", "/health", None)
            self.assertEqual(h["s2mel_dtype"], dtype)
            body = self.body(dtype, TEXTS[0], 20)
            out[dtype] = (self.synth(host, body)["codes"], pcm(body["output_path"]))
        (codes32, a), (codes16, b) = out["fp32"], out["bf16"]
        self.assertEqual(codes32, codes16, "the GPT is untouched")
        self.assertEqual(len(a), len(b))
        self.assertNotEqual(a, b, "the DiT really ran in bf16")
        err = sum((x - y) ** 2 for x, y in zip(a, b)) / len(a)
        power = sum(x * x for x in a) / len(a)
        self.assertGreater(power, 0)
        self.assertLess(err, 1e-2 * power, f"bf16 error {err:.1f} against signal power {power:.1f}")

    def test_activations_are_measured_at_load(self):
        """The adapter measures a line's s2mel and vocoder activations at load (a 4 s line
        behind an 8 s prompt), so the executor has a figure from the first line (the
        health's activation_bytes_per_second): at least the line's own waveform and mel
        per second."""
        host = self.make_host()
        a = host.adapter
        per_second = a.activation_bytes_per_second
        _, h = host.handle("GET", "/health", None)
        self.assertEqual(h["batch"]["activation_bytes_per_second"], per_second)
        wav = a.sample_rate * 4  # fp32 samples of one second of audio
        mel = 80 * int(a.sample_rate / a.hop) * 4
        self.assertGreater(per_second, wav + mel, "the probe saw at least the line's mel and waveform")
        # The 8 s prompt's frames ride along through every estimator call (twice: CFG):
        # the figure is below the whole model, far below a gigabyte a second here.
        self.assertLess(per_second, 1 << 30)

    def test_live_bytes_counts_what_is_made_and_alive(self):
        import torch

        import indextts_batching

        lin = torch.nn.Linear(256, 256)
        x = torch.randn(64, 256)
        with torch.inference_mode(), indextts_batching.LiveBytes(torch) as live:
            y = lin(x)  # 64 KiB
            z = torch.relu(y)  # 64 KiB more
            del y
            z.add_(1)  # in place: nothing new
            w = z.t()  # a view: nothing new
        self.assertEqual(live.peak, 2 * 64 * 256 * 4, "weights and inputs are not counted")
        self.assertEqual(live.live, 64 * 256 * 4)
        del z, w
        self.assertEqual(live.live, 0)

    # -- failure paths ------------------------------------------------------------------

    @unittest.skipIf(DEVICE == "cuda", "on the CPU BigVGAN's CUDA kernel cannot build")
    def test_a_cuda_kernel_that_did_not_build_is_news(self):
        """--cuda-kernel where IndexTTS2 fell back to plain torch: the batch says so,
        for the GPU page; not asked for, it says nothing."""
        _, h = self.make_host("--cuda-kernel").handle("GET", "/health", None)
        self.assertEqual(h["batch"]["vocoder_kernel"], "torch")
        self.assertIn("did not build", h["batch"]["vocoder_kernel_off"])
        _, h = self.make_host().handle("GET", "/health", None)
        self.assertEqual((h["batch"]["vocoder_kernel"], h["batch"]["vocoder_kernel_off"]), ("torch", ""))

    def test_bad_input_is_refused_and_changes_nothing(self):
        host = self.make_host()
        cases = [
            ({"language": "fr"}, 400, "language"),
            ({"speaker": {"reference_audio_path": os.path.join(self.tmp.name, "missing.wav")}}, 400, "reference audio"),
            ({"emotion": {"mode": "text", "text": "furious"}}, 400, "Qwen"),
            ({"emotion": {"mode": "audio", "audio_path": os.path.join(self.tmp.name, "nope.wav")}}, 400, "emotion"),
            ({"text": "   "}, 400, "text"),
        ]
        for extra, code, word in cases:
            body = {**self.body("bad", TEXTS[0], 10), **extra}
            status, res = host.handle("POST", "/synthesize", body)
            self.assertEqual(status, code, (extra, res))
            self.assertIn(word.lower(), res["error"]["message"].lower(), extra)
            self.assertFalse(os.path.exists(body["output_path"]), "no output written")
        self.assert_pool_empty(host)
        self.synth(host, self.body("good", TEXTS[0], 10))

    def test_a_line_too_long_for_the_kv_cache_is_refused(self):
        probe = self.make_host()
        block = probe.batcher.pool.block_bytes()
        host = self.make_host(kv=block * 8)
        status, res = host.handle("POST", "/synthesize", self.body("long", TEXTS[2], 400))
        self.assertEqual(status, 400, res)
        self.assertIn("KV cache", res["error"]["message"])
        self.assert_pool_empty(host)
        self.synth(host, self.body("short", TEXTS[1], 6))
        self.assert_pool_empty(host)

    def test_out_of_memory_in_a_batch_is_retryable_and_the_host_goes_on(self):
        # Kernel by kernel: a decode graph replays kernels, not the Python layer this test
        # makes fail (and a replay allocates nothing, so it cannot run out of memory).
        host = self.make_host("--no-decode-graphs", beams=1)
        layer = host.adapter.layers_list[0]
        real = layer.qkv
        calls = {"n": 0}

        def flaky(x):
            calls["n"] += 1
            if calls["n"] == 8:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
            return real(x)

        layer.qkv = flaky
        results = [None, None]

        def go(i, body):
            results[i] = host.handle("POST", "/synthesize", body)

        threads = [threading.Thread(target=go, args=(i, self.body(f"l{i}", TEXTS[i], 30, seed=i))) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        codes = [r[0] for r in results]
        self.assertIn(507, codes, results)
        self.assertEqual(results[codes.index(507)][1]["error"]["code"], "out_of_memory")
        self.assert_pool_empty(host)
        self.synth(host, self.body("after", TEXTS[1], 8))

    def test_bad_settings_are_refused(self):
        import indextts_batching
        import indextts_host

        for flag, value in (("--max-sequences", "0"), ("--beams", "0"), ("--s2mel-batch", "0"),
                            ("--diffusion-steps", "0"), ("--top-k", "-1"), ("--top-p", "0"), ("--top-p", "1.5"),
                            ("--temperature", "0"), ("--s2mel-waste", "-1"), ("--s2mel-waste", "nan")):
            opts = indextts_host.parse_args(["--port", "0", "--batch", flag, value])
            with self.assertRaises(SystemExit, msg=flag):
                indextts_batching.batching_host(opts)


@unittest.skipUnless(HAS_TORCH, "needs torch")
class IndexTTSBatchingHostProcessTest(unittest.TestCase):
    """indextts_host.py --batch as dubstudio starts it: a process on a Unix socket."""

    def test_health_prepare_synthesize_over_http(self):
        import hosttest

        tmp = tempfile.mkdtemp(prefix="dubstudio-batch-")
        self.addCleanup(shutil.rmtree, tmp, True)
        # The stand-in IndexTTS and torchaudio over real PyTorch (not the directory's torch shim).
        pkgs = os.path.join(tmp, "pkgs")
        os.makedirs(pkgs)
        for name in ("indextts", "torchaudio"):
            os.symlink(os.path.join(STANDIN, name), os.path.join(pkgs, name))
        ref = os.path.join(tmp, "ref.wav")
        write_ref(ref)
        host = hosttest.Host("indextts_host.py", ["--batch", "--model-dir", os.path.join(MODEL, "2"), "--variant", "2",
                                                  "--device", "cpu", "--diffusion-steps", "3", "--max-sequences", "4"],
                             workdir=tmp)
        host.env["PYTHONPATH"] = pkgs
        host.start()
        self.addCleanup(host.stop)
        status, h = host.call("GET", "/health")
        self.assertEqual(status, 200, h)
        self.assertEqual((h["protocol"], h["model"], h["concurrency"]), (2, "IndexTTS-2", 4))
        self.assertIn("batch", h)
        status, res = host.call("POST", "/prepare", {"reference_audio_path": ref, "cache_dir": os.path.join(tmp, "c")})
        self.assertEqual(status, 200, res)
        out = os.path.join(tmp, "out", "line.wav")
        status, res = host.call("POST", "/synthesize", {"text": TEXTS[0], "language": "en", "max_mel_tokens": 20,
                                                        "speaker": {"reference_audio_path": ref},
                                                        "conditioning_path": res["cache_path"], "output_path": out})
        self.assertEqual(status, 200, res)
        self.assertEqual(res["engine"], "indextts")
        with wave.open(out) as w:
            self.assertEqual(w.getframerate(), 22050)
            self.assertGreater(w.getnframes(), 0)
            self.assertAlmostEqual(w.getnframes() / 22050, res["audio_seconds"], places=3)
        status, res = host.call("POST", "/synthesize", {"text": TEXTS[0], "language": "xx",
                                                        "speaker": {"reference_audio_path": ref},
                                                        "output_path": os.path.join(tmp, "bad.wav")})
        self.assertEqual((status, res["error"]["code"]), (400, "unsupported"), res)
        status, h = host.call("GET", "/health")
        self.assertEqual(h["counters"]["requests"], 1, h["counters"])


if __name__ == "__main__":
    unittest.main()
