"""The install check (indextts_check.py) against stand-in model directories with
deliberate faults: python3 -m unittest discover -s tts/hosts"""

import collections
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest
import zipfile

import indextts_check as check
import standin_model
from hosttest import HERE, STANDIN, Host, rmtree


def run_check(model_dir, *args, env=None):
    """Runs `indextts_host.py --check --json` (what dubstudio doctor runs) against the
    stand-in torch and IndexTTS; returns (exit status, {name: result dict}, stdout)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = STANDIN
    e.update(env or {})
    p = subprocess.run([sys.executable, os.path.join(HERE, "indextts_host.py"), "--check", "--json",
                        "--model-dir", model_dir, *args], capture_output=True, text=True, env=e, timeout=60)
    results = {}
    for line in p.stdout.splitlines():
        r = json.loads(line)
        results[r["name"]] = r
    return p.returncode, results, p.stdout


class InstallCheckTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dubstudio-check-")
        self.addCleanup(rmtree, self.dir)

    def build(self, variant="2", *faults):
        return standin_model.build(os.path.join(self.dir, f"m{len(os.listdir(self.dir))}"), variant, faults)

    def test_good_directories_pass(self):
        for variant in ("2", "2.5"):
            with self.subTest(variant=variant):
                rc, res, out = run_check(self.build(variant), "--variant", variant)
                self.assertEqual(rc, 0, out)
                self.assertFalse([r for r in res.values() if r["status"] == "FAIL"], out)
                self.assertEqual(res["gpt shapes"]["status"], "OK")
                self.assertIn("vocabulary", res["gpt shapes"]["detail"])
                self.assertEqual(res["config version"]["detail"], "version " + ("2.0" if variant == "2" else "2.5"))
                for name in ("python", "torch", "cuda", "hf_cache w2v-BERT 2.0", "hf_cache CAMPPlus",
                             "hf_cache BigVGAN", "bigvgan kernel", "free vram"):
                    self.assertEqual(res[name]["status"], "OK", name)
                self.assertEqual(res["bigvgan kernel"]["detail"], "custom CUDA kernel")
                self.assertIn("MiB", res["model bpe.model" if variant == "2" else "model gpt.pth"]["detail"] + " MiB")
        self.assertIn("hf_cache semantic codec (MaskGCT)", run_check(self.build("2"))[1])

    def test_each_fault_is_caught_with_its_message(self):
        cases = {
            "config_version": ("config version", "config.yaml says version 2.5, the host runs IndexTTS-2"),
            "missing_cache": ("hf_cache CAMPPlus", "campplus_cn_common.bin is missing"),
            "shape": ("gpt shapes", "text_embedding.weight is [60510, 1280], config.yaml gives [12001, 1280]"),
            "vocabulary": ("vocabulary", "bpe.model has 11990 pieces, config.yaml says number_text_tokens 12000"),
            "lfs_pointer": ("model gpt.pth", "is a Git LFS pointer"),
        }
        for fault, (name, message) in cases.items():
            with self.subTest(fault=fault):
                rc, res, out = run_check(self.build("2", fault))
                self.assertEqual(rc, 1, out)
                self.assertEqual(res[name]["status"], "FAIL", out)
                self.assertIn(message, res[name]["detail"])
                self.assertTrue(res[name]["fix"], "every failure says what to do")
                others = [n for n, r in res.items() if r["status"] == "FAIL" and n != name and
                          not (fault == "lfs_pointer" and n == "gpt shapes")]
                self.assertEqual(others, [], f"{fault} fails only its own check: {out}")

    def test_the_config_of_the_other_release(self):
        # The known trap: IndexTTS-2.5 weights with IndexTTS-2's config.yaml.
        d = self.build("2.5")
        other = self.build("2")
        rc, res, out = run_check(d, "--variant", "2.5", "--cfg", os.path.join(other, "config.yaml"))
        self.assertEqual(rc, 1)
        self.assertIn("says version 2.0", res["config version"]["detail"])
        self.assertIn("text_embedding.weight is [60510, 1280]", res["gpt shapes"]["detail"])
        rc, res, out = run_check(d, "--variant", "2")
        self.assertEqual(rc, 1, "2.5 weights checked as IndexTTS-2")
        self.assertEqual(res["model bpe.model"]["status"], "FAIL")

    def test_missing_directory_and_qwen(self):
        rc, res, out = run_check(os.path.join(self.dir, "nowhere"))
        self.assertEqual(rc, 1)
        self.assertIn("does not exist", res["model dir"]["detail"])
        d = self.build("2")
        rc, res, _ = run_check(d)
        self.assertEqual(res["qwen emotion model"]["status"], "SKIP")
        rc, res, _ = run_check(d, "--qwen-emo")
        self.assertEqual(res["qwen emotion model"]["status"], "OK")
        rmtree(os.path.join(d, "qwen0.6bemo4-merge"))
        rc, res, _ = run_check(d, "--qwen-emo")
        self.assertEqual(rc, 1)
        self.assertEqual(res["qwen emotion model"]["status"], "FAIL")

    def test_kernel_and_vram(self):
        d = self.build("2")
        rc, res, _ = run_check(d, env={"INDEXTTS_STANDIN_KERNEL": "fail"})
        self.assertEqual(rc, 0, "a kernel that does not build falls back to torch: a warning")
        self.assertEqual(res["bigvgan kernel"]["status"], "WARN")
        self.assertIn("plain torch", res["bigvgan kernel"]["detail"])
        self.assertIn("Ninja", res["bigvgan kernel"]["detail"])
        rc, res, _ = run_check(d, "--no-cuda-kernel")
        self.assertEqual(res["bigvgan kernel"]["detail"], "plain torch (--no-cuda-kernel)")
        rc, res, _ = run_check(d, env={"INDEXTTS_STANDIN_FREE_BYTES": str(2 << 30)})
        self.assertEqual(rc, 1)
        self.assertEqual(res["free vram"]["status"], "FAIL")
        self.assertIn("2.0 GiB free of 80.0 GiB", res["free vram"]["detail"])

    def test_without_torch(self):
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        p = subprocess.run([sys.executable, os.path.join(HERE, "indextts_host.py"), "--check",
                            "--model-dir", self.build("2")], capture_output=True, text=True, env=e, timeout=60)
        try:
            import torch  # noqa: F401
        except ImportError:
            self.assertEqual(p.returncode, 1)
            self.assertIn("FAIL torch: cannot import torch", p.stdout)
            self.assertIn("HOST_PYTHON", p.stdout)
            self.assertIn("OK   gpt shapes", p.stdout, "the files are checked without torch")

    def test_host_refuses_to_start_on_a_bad_install(self):
        d = self.build("2", "shape")
        host = Host("indextts_host.py", ["--model-dir", d], workdir=tempfile.mkdtemp(dir=self.dir))
        host.start(wait_ready=False)
        self.addCleanup(host.stop)
        self.assertEqual(host.proc.wait(30), 1)
        self.assertIn("host: check FAIL gpt shapes: text_embedding.weight is [60510, 1280]", host.log())

    def test_readers(self):
        d = self.build("2")
        with open(os.path.join(d, "config.yaml"), encoding="utf-8") as f:
            cfg_text = f.read()
        simple = check.read_simple_yaml(cfg_text)
        self.assertEqual(simple["gpt"]["number_text_tokens"], 12000)
        self.assertEqual(simple["emo_num"], [3, 17, 2, 8, 4, 5, 10, 24])
        self.assertEqual(simple["vocoder"]["type"], "bigvgan")
        self.assertEqual(check.read_simple_yaml("a:\n    b: 'x' \nversion: 2.0 # c\n"), {"a": {"b": "x"}, "version": 2.0})
        try:
            import yaml
        except ImportError:
            pass
        else:
            self.assertEqual(simple, yaml.safe_load(cfg_text))
        shapes = check.read_torch_shapes(os.path.join(d, "gpt.pth"))
        self.assertEqual(shapes["mel_pos_embedding.emb.weight"], (1818, 1280))
        self.assertEqual(check.read_safetensors_shapes(os.path.join(d, "hf_cache", "semantic_codec_model.safetensors")),
                         {"quantizer.codebook": (8192, 8)})

        # The OrderedDict of state_dict() carries _metadata (restored with BUILD).
        od = collections.OrderedDict()
        od._metadata = collections.OrderedDict([("", {"version": 1})])
        with zipfile.ZipFile(os.path.join(self.dir, "meta.pth"), "w") as z:
            z.writestr("meta/data.pkl", pickle.dumps(od, protocol=2))
        self.assertEqual(check.read_torch_shapes(os.path.join(self.dir, "meta.pth")), {})

        # A checkpoint whose pickle calls anything but tensor rebuilding is refused.
        class Evil:
            def __reduce__(self):
                return (os.system, ("true",))

        bad = os.path.join(self.dir, "evil.pth")
        with zipfile.ZipFile(bad, "w") as z:
            z.writestr("evil/data.pkl", pickle.dumps({"x": Evil()}, protocol=2))
        with self.assertRaises(pickle.UnpicklingError):
            check.read_torch_shapes(bad)
        with open(os.path.join(self.dir, "plain.pth"), "wb") as f:
            f.write(b"not a zip")
        with self.assertRaises(zipfile.BadZipFile):
            check.read_torch_shapes(os.path.join(self.dir, "plain.pth"))

    def test_committed_standin_directories_are_current(self):
        # testdata/standin-model/<variant> is what the Go tests start hosts on.
        for variant in ("2", "2.5"):
            committed = os.path.join(HERE, "testdata", "standin-model", variant)
            fresh = standin_model.build(os.path.join(self.dir, "fresh" + variant), variant)
            for root, _, files in os.walk(fresh):
                for name in files:
                    rel = os.path.relpath(os.path.join(root, name), fresh)
                    with open(os.path.join(fresh, rel), "rb") as a, open(os.path.join(committed, rel), "rb") as b:
                        self.assertEqual(a.read(), b.read(), f"{variant}/{rel}: run standin_model.py again")


if __name__ == "__main__":
    unittest.main()
