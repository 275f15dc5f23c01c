"""bench_host.py: importable and well-formed without torch; a CPU self-test with torch."""

import importlib.util
import os
import py_compile
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
HAS_TORCH = importlib.util.find_spec("torch") is not None


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


if __name__ == "__main__":
    unittest.main()
