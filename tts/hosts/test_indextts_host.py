"""indextts_host.py against the stand-in IndexTTS (testdata/standin): run with
python3 -m unittest discover -s tts/hosts"""

import hashlib
import json
import os
import tempfile
import unittest
import wave

import standin_model
from hosttest import Host, read_bytes, rmtree, write_wav


class IndexTTSHostTest(unittest.TestCase):
    variant = "2"

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dubstudio-itts-")
        self.addCleanup(rmtree, self.dir)
        self.model_dir = standin_model.build(os.path.join(self.dir, "checkpoints"), self.variant)
        self.cache_dir = os.path.join(self.dir, "cond")
        self.log = os.path.join(self.dir, "standin.log")
        self.ref = write_wav(os.path.join(self.dir, "ref.wav"), seconds=1.0)
        self.ref_sha = hashlib.sha256(read_bytes(self.ref)).hexdigest()

    def start(self, *extra, env=None):
        e = {"INDEXTTS_STANDIN_LOG": self.log}
        e.update(env or {})
        host = Host("indextts_host.py",
                    ["--model-dir", self.model_dir, "--variant", self.variant, "--model-version", "test-v1", *extra],
                    env=e, workdir=tempfile.mkdtemp(dir=self.dir))
        host.start()
        self.addCleanup(host.stop)
        return host

    def events(self, kind):
        if not os.path.exists(self.log):
            return []
        with open(self.log, encoding="utf-8") as f:
            return [line.split(" ", 1)[1].strip() for line in f if line.startswith(kind + " ")]

    def infers(self):
        """What the stand-in's infer() used, one dict per call (the log's infer lines)."""
        return [json.loads(e) for e in self.events("infer")]

    def synth(self, host, text="Hello there, how are you?", **kw):
        out = os.path.join(self.dir, "out", f"{abs(hash((text, str(kw))))}.wav")
        body = {"text": text, "output_path": out, "speaker": {"reference_audio_path": self.ref}}
        body.update(kw)
        return host.call("POST", "/synthesize", body)

    def test_health(self):
        host = self.start()
        status, h = host.call("GET", "/health")
        self.assertEqual(status, 200)
        self.assertEqual(h["protocol"], 1)
        self.assertEqual(h["model"], "IndexTTS-" + self.variant)
        self.assertEqual(h["version"], "test-v1")
        self.assertEqual(h["concurrency"], 1)
        self.assertEqual(h["busy"], 0)
        self.assertEqual(h["resident_bytes"], 4_300_000_000)
        self.assertEqual(h["duration_control"], self.variant == "2.5")
        self.assertFalse(h["emotion_text"])
        self.assertEqual(host.last_content_type, "application/json")

    def test_prepare_computes_once_then_loads_the_cache_file(self):
        host = self.start()
        req = {"reference_audio_path": self.ref, "reference_sha256": self.ref_sha, "cache_dir": self.cache_dir}
        status, first = host.call("POST", "/prepare", req)
        self.assertEqual(status, 200, first)
        self.assertTrue(first["computed"])
        self.assertTrue(os.path.isfile(first["cache_path"]))
        self.assertTrue(os.path.basename(first["cache_path"]).startswith(self.ref_sha + "-test-v1"))
        status, second = host.call("POST", "/prepare", req)
        self.assertEqual(status, 200)
        self.assertFalse(second["computed"])
        self.assertEqual(second["cache_path"], first["cache_path"])
        self.assertEqual(len(self.events("spk")), 1)

        # A new process (a restarted host) loads the file instead of recomputing, and
        # synthesis with the conditioning path computes nothing either.
        host.stop()
        host2 = self.start()
        status, third = host2.call("POST", "/prepare", req)
        self.assertEqual(status, 200)
        self.assertFalse(third["computed"])
        host3 = self.start()
        status, res = self.synth(host3, speaker={"reference_audio_path": self.ref,
                                                 "conditioning_path": first["cache_path"]})
        self.assertEqual(status, 200, res)
        self.assertEqual(len(self.events("spk")), 1, "speaker conditioning computed once in three processes")
        self.assertEqual(len(self.events("emo")), 1, "the speaker's emotion embedding is cached too")
        _, h = host3.call("GET", "/health")
        self.assertEqual(h["counters"]["conditioning_computed"], 0)
        _, h = host2.call("GET", "/health")
        self.assertEqual(h["counters"]["conditioning_loaded"], 1)

        # Another model version does not reuse the file.
        host4 = self.start("--model-version", "test-v2")
        status, other = host4.call("POST", "/prepare", req)
        self.assertTrue(other["computed"])
        self.assertNotEqual(other["cache_path"], first["cache_path"])
        self.assertEqual(len(self.events("spk")), 2)

    def test_prepare_hashes_the_file_and_checks_the_hash(self):
        host = self.start()
        status, res = host.call("POST", "/prepare", {"reference_audio_path": self.ref, "cache_dir": self.cache_dir})
        self.assertEqual(status, 200, res)
        self.assertIn(self.ref_sha, res["cache_path"])
        status, res = host.call("POST", "/prepare", {"reference_audio_path": self.ref, "reference_sha256": "0" * 64})
        self.assertEqual(status, 400)
        self.assertEqual(res["error"]["code"], "invalid_input")
        status, res = host.call("POST", "/prepare", {"reference_audio_path": os.path.join(self.dir, "nope.wav")})
        self.assertEqual(status, 400)

    def test_synthesize_writes_a_wav(self):
        host = self.start()
        status, res = self.synth(host, seed=7)
        self.assertEqual(status, 200, res)
        with wave.open(res["output_path"]) as w:
            self.assertEqual(w.getframerate(), 22050)
            seconds = w.getnframes() / w.getframerate()
        self.assertEqual(res["sample_rate"], 22050)
        self.assertAlmostEqual(res["audio_seconds"], seconds, places=4)
        self.assertGreater(seconds, 1.0)
        self.assertEqual(res["engine"], "indextts")
        self.assertEqual(res["model_version"], "test-v1")
        per_second = 25 if self.variant == "2.5" else 50
        self.assertEqual(res["tokens"], round(seconds * per_second))
        for stage in ("conditioning", "gpt", "s2mel", "vocoder", "infer", "total"):
            self.assertIn(stage, res["stages"])
        # Peaks are measured around the request: the model plus 45 MB + 38 MB/s.
        extra = 45_000_000 + int(38_000_000 * seconds)
        self.assertEqual(res["peak_allocated_bytes"], 4_300_000_000 + extra)
        self.assertGreaterEqual(res["peak_reserved_bytes"], res["peak_allocated_bytes"])

        # The same seed gives the same audio.
        status, again = self.synth(host, seed=7, target_seconds=1)
        self.assertEqual(status, 200)
        self.assertEqual(read_bytes(res["output_path"]), read_bytes(again["output_path"]))

    def test_emotion_modes(self):
        host = self.start()
        emo = write_wav(os.path.join(self.dir, "sad.wav"), seconds=0.5, freq=150)
        status, res = self.synth(host, emotion={"mode": "audio", "audio_path": emo, "weight": 0.6})
        self.assertEqual(status, 200, res)
        self.assertIn(emo, self.events("emo"))
        status, res = self.synth(host, emotion={"mode": "vector", "vector": [1, 1, 0, 0, 0, 0, 0, 0]})
        self.assertEqual(status, 200, res)
        status, res = self.synth(host, emotion={"mode": "text", "text": "angry"})
        self.assertEqual(status, 400)
        self.assertIn("Qwen", res["error"]["message"])

    def test_out_of_memory(self):
        host = self.start()
        status, res = self.synth(host, text="This line is far too long [oom]")
        self.assertEqual(status, 507, res)
        self.assertEqual(res["error"]["code"], "out_of_memory")
        self.assertIn("CUDA out of memory", res["error"]["message"])
        self.assertIn("OutOfMemoryError", res["error"]["traceback"])
        _, h = host.call("GET", "/health")
        self.assertEqual(h["counters"]["ooms"], 1)
        self.assertEqual(h["reserved_bytes"], h["resident_bytes"], "the cache was emptied after the OOM")
        self.assertEqual(h["busy"], 0)
        status, res = self.synth(host)
        self.assertEqual(status, 200, "the host keeps serving after an OOM")

    def test_internal_error(self):
        host = self.start()
        status, res = self.synth(host, text="[boom]")
        self.assertEqual(status, 500)
        self.assertEqual(res["error"]["code"], "internal")
        self.assertIn("stand-in failure", res["error"]["message"])
        self.assertIn("Traceback", res["error"]["traceback"])

    def test_invalid_input(self):
        host = self.start()
        cases = {
            "empty text": {"text": "  "},
            "no output": {"output_path": ""},
            "bad factor": {"duration_factor": 3},
            "short vector": {"emotion": {"mode": "vector", "vector": [0.1, 0.2]}},
            "vector value": {"emotion": {"mode": "vector", "vector": [1.5, 0, 0, 0, 0, 0, 0, 0]}},
            "vector string": {"emotion": {"mode": "vector", "vector": ["a", 0, 0, 0, 0, 0, 0, 0]}},
            "zero vector": {"emotion": {"mode": "vector", "vector": [0] * 8}},
            "mode": {"emotion": {"mode": "joy"}},
            "audio without path": {"emotion": {"mode": "audio"}},
            "missing emotion audio": {"emotion": {"mode": "audio", "audio_path": "/nonexistent.wav"}},
            "missing reference": {"speaker": {"reference_audio_path": "/nonexistent.wav"}},
            "text type": {"text": 5},
            "seed type": {"seed": "x"},
        }
        for name, override in cases.items():
            body = {"text": "Hello.", "output_path": os.path.join(self.dir, "x.wav"),
                    "speaker": {"reference_audio_path": self.ref}}
            body.update(override)
            status, res = host.call("POST", "/synthesize", body)
            self.assertEqual(status, 400, name)
            self.assertEqual(res["error"]["code"], "invalid_input", name)
        status, res = host.call("POST", "/synthesize", raw=b"{not json")
        self.assertEqual(status, 400)
        status, res = host.call("POST", "/synthesize", raw=b"[1, 2]")
        self.assertEqual(status, 400)
        status, res = host.call("GET", "/nowhere")
        self.assertEqual(status, 404)
        status, res = host.call("GET", "/synthesize")
        self.assertEqual(status, 405)
        status, _ = host.call("GET", "/health")
        self.assertEqual(status, 200)

    def test_release_cache(self):
        host = self.start()
        self.synth(host, text="A rather long line that takes a few seconds to say out loud.")
        status, res = host.call("POST", "/release_cache", {})
        self.assertEqual(status, 200)
        self.assertGreater(res["reserved_before"], res["reserved_after"])
        self.assertEqual(res["reserved_after"], res["allocated"])

    def test_loading_state_and_load_failure(self):
        host = Host("indextts_host.py", ["--model-dir", self.model_dir, "--variant", self.variant],
                    env={"INDEXTTS_STANDIN_LOAD_SECONDS": "30"}, workdir=tempfile.mkdtemp(dir=self.dir))
        host.start(wait_ready=False)
        self.addCleanup(host.stop)
        status, res = host.call("GET", "/health")
        self.assertEqual(status, 503)
        self.assertEqual(res["error"]["code"], "unavailable")
        status, res = self.synth(host)
        self.assertEqual(status, 503)
        host.stop()
        self.assertEqual(host.proc.returncode, 0, "SIGTERM during load is a clean stop")
        self.assertFalse(os.path.exists(host.socket), "the socket file is removed")

        bad = Host("indextts_host.py", ["--model-dir", os.path.join(self.dir, "missing"), "--variant", self.variant],
                   workdir=tempfile.mkdtemp(dir=self.dir))
        bad.start(wait_ready=False)
        self.addCleanup(bad.stop)
        self.assertEqual(bad.proc.wait(30), 1)
        self.assertIn("does not exist", bad.log())

    def test_crash_drops_the_connection(self):
        host = self.start()
        with self.assertRaises(Exception):
            self.synth(host, text="[crash]")
        self.assertEqual(host.proc.wait(10), 3)


    def test_emotion_arguments_reach_the_model(self):
        # The stand-in does with each argument what IndexTTS2 does, so these fail when the
        # host passes a wrong order, loses emo_alpha or sends the wrong prompt.
        host = self.start()
        status, res = self.synth(host, emotion={"mode": "vector", "weight": 0.5, "vector": [0, 0, 0.6, 0, 0, 0, 0, 0.1]})
        self.assertEqual(status, 200, res)
        call = self.infers()[-1]
        self.assertEqual(call["emo_vector"], [0, 0, 0.3, 0, 0, 0, 0, 0.05], "sad stays third, scaled by the weight")
        self.assertEqual(call["emo_audio_prompt"], self.ref, "a vector uses the speaker as emotion reference")
        self.assertEqual(call["emo_alpha"], 1.0)
        emo = write_wav(os.path.join(self.dir, "angry.wav"), seconds=0.5, freq=300)
        status, res = self.synth(host, emotion={"mode": "audio", "audio_path": emo, "weight": 0.6})
        self.assertEqual(status, 200, res)
        call = self.infers()[-1]
        self.assertEqual((call["emo_audio_prompt"], call["emo_alpha"], call["emo_vector"]), (emo, 0.6, None))
        status, res = self.synth(host)
        call = self.infers()[-1]
        self.assertEqual((call["emo_audio_prompt"], call["emo_alpha"], call["emo_vector"]), (self.ref, 1.0, None))
        self.assertFalse(call["use_random"])

    def test_emotion_text_and_its_weight(self):
        host = self.start("--qwen-emo")
        status, res = self.synth(host, text="Go away.", emotion={"mode": "text", "text": "angry", "weight": 0.5})
        self.assertEqual(status, 200, res)
        self.assertEqual(self.infers()[-1]["emo_vector"], [0, 0.5, 0, 0, 0, 0, 0, 0])
        status, res = self.synth(host, text="I am so happy.", emotion={"mode": "text"})
        self.assertEqual(status, 200, res)
        self.assertEqual(self.infers()[-1]["emo_vector"], [1.0, 0, 0, 0, 0, 0, 0, 0], "the line's text by default")

    def test_seed_reaches_torch(self):
        host = self.start()
        draws = []
        for seed in (7, 7, 8, 0, 0):
            status, res = self.synth(host, seed=seed)
            self.assertEqual(status, 200, res)
            draws.append(self.infers()[-1]["draw"])
        self.assertEqual(draws[0], draws[1], "the same seed, the same torch draw")
        self.assertNotEqual(draws[0], draws[2])
        self.assertNotEqual(draws[3], draws[4], "unseeded runs differ")

    def test_segments_and_tokens(self):
        host = self.start()
        text = "One two three four. Five six seven eight. Nine ten eleven twelve."
        status, res = self.synth(host, text=text, max_text_tokens_per_segment=6)
        self.assertEqual(status, 200, res)
        call = self.infers()[-1]
        self.assertEqual(len(call["segments"]), 3, call["segments"])
        self.assertEqual(call["max_text_tokens_per_segment"], 6)
        per_second = 25 if self.variant == "2.5" else 50
        self.assertEqual(res["tokens"], sum(call["codes"]), "the stop tokens are not counted")
        speech = sum(call["codes"]) / per_second
        self.assertAlmostEqual(res["audio_seconds"], speech + 2 * 0.2, places=2, msg="every segment is in the take")

    def test_caps(self):
        host = self.start()
        status, res = self.synth(host, max_mel_tokens=5000, max_text_tokens_per_segment=1000)
        self.assertEqual(status, 200, res)
        call = self.infers()[-1]
        self.assertEqual((call["max_mel_tokens"], call["max_text_tokens_per_segment"]), (1500, 200))
        _, h = host.call("GET", "/health")
        self.assertEqual((h["max_mel_tokens"], h["max_text_tokens_per_segment"]), (1500, 200))

        # The config's own tables lower the caps.
        small = standin_model.build(os.path.join(self.dir, "small"), self.variant, max_mel_tokens=1000)
        host2 = Host("indextts_host.py", ["--model-dir", small, "--variant", self.variant],
                     env={"INDEXTTS_STANDIN_LOG": self.log}, workdir=tempfile.mkdtemp(dir=self.dir)).start()
        self.addCleanup(host2.stop)
        status, res = self.synth(host2, max_mel_tokens=1500)
        self.assertEqual(status, 200, res)
        self.assertEqual(self.infers()[-1]["max_mel_tokens"], 1000)

    def test_text_too_long(self):
        host = self.start()
        # One sentence of 700 words: a segment past the 600 text positions. Without the
        # host's guard the stand-in raises a device-side assert and stays broken.
        status, res = self.synth(host, text=" ".join(["word"] * 700))
        self.assertEqual(status, 400, res)
        self.assertEqual(res["error"]["code"], "text_too_long")
        self.assertIn("700 text tokens", res["error"]["message"])
        status, res = self.synth(host, text="Hello there, how are you doing today?", max_mel_tokens=20)
        self.assertEqual(status, 400, res)
        self.assertEqual(res["error"]["code"], "text_too_long")
        self.assertIn("max_mel_tokens (20", res["error"]["message"])
        status, res = self.synth(host)
        self.assertEqual(status, 200, "the host is still usable")

    def test_languages(self):
        host = self.start()
        ok = {"zh-CN": "zh", "en-US": "en", "EN_gb": "en", "cmn": "zh"}
        if self.variant == "2.5":
            ok.update({"ja-JP": "ja", "es-419": "es", "zh-en": "zhen"})
        for code, want in ok.items():
            status, res = self.synth(host, language=code)
            self.assertEqual(status, 200, (code, res))
            if self.variant == "2.5":
                self.assertEqual(self.infers()[-1]["lang"], want, code)
        refused = ["ko", "fr-FR", "yue"] + (["ja"] if self.variant == "2" else [])
        for code in refused:
            status, res = self.synth(host, language=code)
            self.assertEqual(status, 400, code)
            self.assertEqual(res["error"]["code"], "unsupported", code)
            self.assertIn(repr(code), res["error"]["message"])

    def test_oom_drops_the_cache_slot(self):
        host = self.start()
        req = {"reference_audio_path": self.ref, "reference_sha256": self.ref_sha, "cache_dir": self.cache_dir}
        _, prep = host.call("POST", "/prepare", req)
        spk = {"reference_audio_path": self.ref, "conditioning_path": prep["cache_path"]}
        self.assertEqual(self.synth(host, speaker=spk)[0], 200)
        self.assertEqual(len(self.events("spk")), 1)
        status, _ = self.synth(host, text="Far too long [oom]", speaker=spk)
        self.assertEqual(status, 507)
        self.assertEqual(self.synth(host, speaker=spk)[0], 200)
        self.assertEqual(len(self.events("spk")), 1, "restored from the cache file")
        _, h = host.call("GET", "/health")
        self.assertEqual(h["counters"]["conditioning_computed"], 1)
        self.synth(host, text="Again [oom]", speaker=spk)
        self.assertEqual(self.synth(host)[0], 200)
        self.assertEqual(len(self.events("spk")), 2, "without a cache file the slot was empty: recomputed")

    def test_empty_cache_on_a_speaker_change(self):
        host = self.start()
        other = write_wav(os.path.join(self.dir, "other.wav"), seconds=1.0, freq=330)
        self.synth(host)
        before = len(self.events("empty_cache"))
        self.synth(host)
        self.assertEqual(len(self.events("empty_cache")), before, "the same speaker keeps the cache")
        self.synth(host, speaker={"reference_audio_path": other})
        self.assertGreater(len(self.events("empty_cache")), before)
        before = len(self.events("empty_cache"))
        host.call("POST", "/prepare", {"reference_audio_path": self.ref})
        self.assertGreater(len(self.events("empty_cache")), before, "prepare of another speaker empties it too")

    def test_bigvgan_kernel_is_reported(self):
        _, h = self.start().call("GET", "/health")
        self.assertEqual(h["bigvgan_kernel"], "cuda")
        _, h = self.start(env={"INDEXTTS_STANDIN_KERNEL": "fail"}).call("GET", "/health")
        self.assertEqual(h["bigvgan_kernel"], "torch", "the kernel did not build: IndexTTS fell back")
        _, h = self.start("--no-cuda-kernel").call("GET", "/health")
        self.assertEqual(h["bigvgan_kernel"], "torch")

    def test_torch_compile_reaches_the_model(self):
        host = self.start()
        _, h = host.call("GET", "/health")
        self.assertFalse(h["torch_compile"])
        self.assertEqual(self.events("compile"), ["False"])
        _, h = self.start("--torch-compile").call("GET", "/health")
        self.assertTrue(h["torch_compile"])
        self.assertEqual(self.events("compile"), ["False", "True"], "IndexTTS2 was built with use_torch_compile")


class IndexTTS25HostTest(IndexTTSHostTest):
    variant = "2.5"

    def test_duration_factor(self):
        host = self.start()
        text = "这是一个用来测试时长的句子。"
        status, base = self.synth(host, text=text, language="zh")
        self.assertEqual(status, 200, base)
        status, slow = self.synth(host, text=text, language="zh", duration_factor=1.5)
        self.assertEqual(status, 200, slow)
        self.assertEqual(slow["duration_factor"], 1.5)
        self.assertAlmostEqual(slow["audio_seconds"] / base["audio_seconds"], 1.5, delta=0.1)


if __name__ == "__main__":
    unittest.main()
