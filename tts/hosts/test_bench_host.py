"""bench_host.py: importable and well-formed without torch; a CPU self-test with torch."""

import importlib.util
import json
import os
import py_compile
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
HAS_TORCH = importlib.util.find_spec("torch") is not None


def has_cuda():
    if not HAS_TORCH:
        return False
    import torch

    return torch.cuda.is_available()


class BenchHostTest(unittest.TestCase):
    def test_compiles_and_imports(self):
        py_compile.compile(os.path.join(HERE, "bench_host.py"), doraise=True)
        import bench_host

        d = bench_host.Dims()
        self.assertEqual((d.gpt_dim, d.gpt_layers, d.gpt_heads), (1280, 24, 20))
        self.assertEqual((d.dit_dim, d.dit_layers), (512, 13))
        hop = 1
        for r in d.voc_rates:
            hop *= r
        self.assertEqual(hop, bench_host.HOP)
        opts = bench_host.parse_args(["--port", "0"])
        self.assertEqual((opts.beams, opts.diffusion_steps, opts.tokens_per_second), (3, 25, 50))
        self.assertEqual((opts.share_weights, opts.weights_role), ("", "auto"))

    def test_kv_cache_share_matches_the_worker(self):
        """The worker predicts a batching host's memory with gpu.AutoKVCacheShare
        before the host reports it: the two shares must be one number."""
        import re

        import bench_host

        with open(os.path.join(HERE, "..", "..", "gpu", "profile.go"), encoding="utf-8") as f:
            m = re.search(r"const AutoKVCacheShare = ([0-9.]+)", f.read())
        self.assertIsNotNone(m, "gpu/profile.go declares AutoKVCacheShare")
        self.assertEqual(float(m.group(1)), bench_host.AUTO_KV_CACHE_SHARE)

    @unittest.skipUnless(HAS_TORCH, "needs PyTorch")
    def test_compile_flags(self):
        """--s2mel-compile and --vocoder-compile wrap the estimator and the vocoder in
        torch.compile; on a PyTorch without it the host refuses to load, saying why."""
        import bench_host
        import torch

        opts = bench_host.parse_args(["--port", "0", "--device", "cpu", "--s2mel-compile", "--vocoder-compile"])
        b = bench_host.BenchBackend(opts, bench_host.Dims.tiny())
        if not hasattr(torch, "compile"):
            with self.assertRaisesRegex(RuntimeError, "--s2mel-compile needs PyTorch 2 or later"):
                b.load()
            return
        b.load()
        self.assertIn("estimator", b.s2mel.__dict__, "the instance's estimator is the compiled one")
        self.assertIn("forward", b.vocoder.__dict__, "and the vocoder's forward")

    @unittest.skipUnless(HAS_TORCH, "needs PyTorch")
    def test_vocoder_fused_where_its_check_passes(self):
        """--vocoder-fused replaces the vocoder's activations where alias_free's check
        passes and says why not where it fails (here on the CPU: not on CUDA); with
        --vocoder-compile, which replaces them too, the host refuses to load."""
        import bench_host

        opts = bench_host.parse_args(["--port", "0", "--device", "cpu", "--vocoder-fused"])
        b = bench_host.BenchBackend(opts, bench_host.Dims.tiny())
        b.load()
        info = b.info()
        self.assertEqual((info["vocoder_kernel"], info["vocoder_kernel_off"]), ("torch", "not on CUDA"))
        self.assertFalse(any(getattr(m, "fused", False) for m in b.vocoder.modules()))
        plain = bench_host.BenchBackend(bench_host.parse_args(["--port", "0", "--device", "cpu"]), bench_host.Dims.tiny())
        plain.load()
        self.assertEqual(plain.info()["vocoder_kernel"], "torch")
        self.assertNotIn("vocoder_kernel_off", plain.info())
        opts = bench_host.parse_args(["--port", "0", "--device", "cpu", "--vocoder-fused", "--vocoder-compile"])
        with self.assertRaisesRegex(RuntimeError, "choose one"):
            bench_host.BenchBackend(opts, bench_host.Dims.tiny()).load()

    @unittest.skipUnless(has_cuda(), "needs CUDA and Triton")
    def test_fused_activation_matches_the_four_steps(self):
        """alias_free's kernel against the module's four steps in float64: on signals of
        every stage's channels, in fp32 and bf16, and the whole vocoder's audio."""
        import torch

        import alias_free
        import bench_host

        dev = torch.device("cuda")
        self.assertIsNone(alias_free.check(dev))
        g = torch.Generator(device=dev).manual_seed(1)
        for c, t, dtype, tol in ((768, 1723, torch.float32, 1e-4), (24, 44000, torch.float32, 1e-4),
                                 (96, 5000, torch.bfloat16, 0.05)):
            x = torch.randn(2, c, t, generator=g, device=dev)
            alpha = torch.rand(1, c, 1, generator=g, device=dev) + 0.2
            filt = (torch.hann_window(12, device=dev) / 6).view(1, 1, 12).repeat(c, 1, 1)
            got = alias_free.snake_resample(x.to(dtype), alpha, filt)
            self.assertEqual((got.shape, got.dtype), (x.shape, dtype))
            want = alias_free.reference(x.to(dtype).double(), alpha.double(), filt.double())
            err = (got.double() - want).abs().max().item()
            self.assertLess(err, tol * max(1.0, want.abs().max().item()), (c, t, dtype))
        opts = bench_host.parse_args(["--port", "0", "--device", "cuda", "--vocoder-fused"])
        b = bench_host.BenchBackend(opts, bench_host.Dims.tiny())
        b.load()
        self.assertEqual(b.info()["vocoder_kernel"], "fused")
        mel = torch.randn(2, b.dims.n_mels, 40, generator=g, device=dev)
        with torch.inference_mode():
            fused = b.vocoder(mel)
            for m in b.vocoder.modules():
                if isinstance(m, bench_host.AntiAliasSnake):
                    m.fused = False
            plain = b.vocoder(mel)
        self.assertLess((fused - plain).abs().max().item(), 1e-3)

    def test_a_borrower_without_a_lender_fails(self):
        import bench_host

        with tempfile.TemporaryDirectory() as tmp:
            share = bench_host.WeightShare(os.path.join(tmp, "w.sock"))
            with self.assertRaisesRegex(RuntimeError, "no host lends the weights"):
                share.borrow("borrow")
            self.assertIsNone(share.borrow("auto"), "auto: the first host lends")

    def test_text_estimates(self):
        import bench_host

        self.assertAlmostEqual(bench_host.natural_seconds("one two three"), 3 / 2.7)
        self.assertEqual(bench_host.text_token_count("你好世界"), 4)
        self.assertGreater(bench_host.text_token_count("internationalization"), 1)

    @unittest.skipIf(HAS_TORCH, "torch is installed: the self-test runs instead")
    def test_without_torch_says_so(self):
        for args in (["--selftest"], ["--port", "0"]):
            r = subprocess.run([sys.executable, os.path.join(HERE, "bench_host.py"), *args],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("PyTorch", r.stderr)

    @unittest.skipUnless(HAS_TORCH, "needs torch")
    def test_selftest_tiny(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "bench_host.py"), "--selftest", "--device", "cpu"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    @unittest.skipUnless(HAS_TORCH, "needs torch")
    def test_borrowed_weights_compute_what_the_lenders_do(self):
        """A host built on the meta device and given another's tensors (what a borrower
        of --share-weights does with the lender's) computes the same as the lender."""
        import torch

        import bench_host

        opts = bench_host.parse_args(["--device", "cpu", "--port", "0"])
        lender = bench_host.BenchBackend(opts, bench_host.Dims.tiny())
        lender.load()
        borrower = bench_host.BenchBackend(opts, bench_host.Dims.tiny())
        modules = borrower._build("meta")
        for first, m in {"semantic": lender.semantic, "style": lender.style, "gpt": lender.gpt,
                         "s2mel": lender.s2mel, "vocoder": lender.vocoder}.items():
            for name, t in list(m.named_parameters()) + list(m.named_buffers()):
                bench_host._assign(modules, f"{first}.{name}", t.detach())
        for m in modules.values():
            for name, t in list(m.named_parameters()) + list(m.named_buffers()):
                self.assertFalse(t.is_meta, name)
        mel = torch.randn(1, lender.dims.n_mels, 20)
        with torch.inference_mode():
            self.assertTrue(torch.equal(lender.vocoder(mel), borrower.vocoder(mel)))

    @unittest.skipUnless(has_cuda(), "needs a CUDA GPU")
    def test_hosts_share_one_copy_of_the_weights_on_a_gpu(self):
        """A host serving with --share-weights lends its weights; a second host started
        with the same path borrows them, holds far less memory and synthesizes."""
        with tempfile.TemporaryDirectory() as tmp:
            share = os.path.join(tmp, "weights.sock")
            lender = subprocess.Popen([sys.executable, os.path.join(HERE, "bench_host.py"), "--share-weights", share,
                                       "--weights-role", "lend", "--socket", os.path.join(tmp, "lender.sock")],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                self.assertTrue(lender.stdout.readline().startswith("LISTENING"))
                for line in lender.stderr:  # the model loads after the LISTENING line
                    if "ready on" in line or "failed" in line:
                        self.assertIn("ready on", line)
                        break
                r = subprocess.run([sys.executable, os.path.join(HERE, "bench_host.py"), "--selftest", "--full",
                                    "--share-weights", share, "--weights-role", "borrow"], capture_output=True, text=True, timeout=600)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                loaded = json.loads(r.stdout.splitlines()[0])
                print("borrower:", loaded, file=sys.stderr)
                self.assertLess(loaded["resident_bytes"], 1 << 30, "the borrower allocated no weights of its own")
            finally:
                lender.terminate()
                lender.wait(timeout=60)
                lender.stdout.close()
                lender.stderr.close()


if __name__ == "__main__":
    unittest.main()
