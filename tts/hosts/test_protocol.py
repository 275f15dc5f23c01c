"""Unit tests of protocol.py: validation, WAV headers, stage capture, error mapping."""

import os
import struct
import sys
import tempfile
import unittest

import protocol
from protocol import HostError, ModelHost


class ParseTest(unittest.TestCase):
    def test_normalizes(self):
        r = protocol.parse_synthesis({"text": "Hi.", "output_path": "/o.wav",
                                      "emotion": {"mode": "vector", "vector": [1, 1, 0, 0, 0, 0, 0, 0]}})
        self.assertAlmostEqual(r.emotion.vector[0], 0.4)
        self.assertAlmostEqual(sum(r.emotion.vector), 0.8)
        self.assertEqual(r.emotion.weight, 1.0)
        self.assertEqual(r.max_mel_tokens, 1500)
        self.assertEqual(r.max_text_tokens_per_segment, 120)
        self.assertFalse(r.first)
        r = protocol.parse_synthesis({"text": "Hi.", "output_path": "/o.wav", "emotion": None, "speaker": None})
        self.assertEqual(r.emotion.mode, "speaker")
        r = protocol.parse_synthesis({"text": "Hi.", "output_path": "/o.wav", "first": True})
        self.assertTrue(r.first)

    def test_rejects(self):
        for body in ([], {"text": "x"}, {"text": "x", "output_path": "/o", "duration_factor": float("nan")},
                     {"text": "x", "output_path": "/o", "max_mel_tokens": 1.5},
                     {"text": "x", "output_path": "/o", "speaker": []},
                     {"text": "x" * 5001, "output_path": "/o"},
                     {"text": "x", "output_path": "/o", "first": 1}):
            with self.assertRaises(HostError) as cm:
                protocol.parse_synthesis(body)
            self.assertEqual(cm.exception.code, "invalid_input")
            self.assertEqual(cm.exception.status, 400)

    def test_prepare(self):
        self.assertEqual(protocol.parse_prepare({"reference_audio_path": "/r.wav"}), ("/r.wav", "", ""))
        with self.assertRaises(HostError):
            protocol.parse_prepare({"reference_audio_path": "/r.wav", "reference_sha256": "xyz"})


class WavTest(unittest.TestCase):
    def write(self, chunks):
        fd, path = tempfile.mkstemp(suffix=".wav")
        self.addCleanup(os.unlink, path)
        body = b"WAVE" + b"".join(cid + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")
                                  for cid, data in chunks)
        with os.fdopen(fd, "wb") as f:
            f.write(b"RIFF" + struct.pack("<I", len(body)) + body)
        return path

    def test_float_stereo_with_extra_chunks(self):
        fmt = struct.pack("<HHIIHH", 3, 2, 48000, 48000 * 8, 8, 32)
        path = self.write([(b"LIST", b"odd"), (b"fmt ", fmt), (b"data", b"\0" * (48000 * 8 // 2))])
        self.assertEqual(protocol.wav_info(path), (48000, 0.5))

    def test_not_wav(self):
        fd, path = tempfile.mkstemp()
        self.addCleanup(os.unlink, path)
        os.write(fd, b"hello")
        os.close(fd)
        with self.assertRaises(ValueError):
            protocol.wav_info(path)


class StagesTest(unittest.TestCase):
    def test_capture(self):
        stages = {}
        with protocol.capture_stages(stages):
            print(">> gpt_gen_time: 1.25 seconds")
            print(">> bigvgan_time: 0.05 seconds")
            print("unrelated")
        self.assertEqual(stages, {"gpt": 1.25, "vocoder": 0.05})
        self.assertIsNot(sys.stdout, None)


class FakeBackend:
    def __init__(self, exc):
        self.exc = exc
        self.ooms = 0

    def load(self):
        pass

    def info(self):
        return {"model": "fake", "version": "1"}

    def synthesize(self, req):
        raise self.exc

    def on_oom(self):
        self.ooms += 1


class HostTest(unittest.TestCase):
    def test_error_mapping(self):
        cases = [
            (RuntimeError("CUDA out of memory. Tried to allocate"), 507, "out_of_memory"),
            (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"), 507,
             "out_of_memory"),
            # cuDNN's attention at the memory limit (seen on an H200 shrunk to 24 GiB)
            (RuntimeError("Expected mha_graph.execute(handle, variant_pack, workspace_ptr.get()).is_good() to be "
                          "true, but got false."), 507, "out_of_memory"),
            (FileNotFoundError("no such file"), 400, "invalid_input"),
            (ValueError("bad"), 500, "internal"),
            (HostError("invalid_input", "nope"), 400, "invalid_input"),
        ]
        for exc, status, code in cases:
            backend = FakeBackend(exc)
            host = ModelHost(backend)
            host.load()
            got, body = host.handle("POST", "/synthesize", {"text": "x", "output_path": "/o.wav"})
            self.assertEqual(got, status, exc)
            self.assertEqual(body["error"]["code"], code)
            self.assertEqual(backend.ooms, 1 if code == "out_of_memory" else 0)
            self.assertEqual(host.health()["busy"], 0)

    def test_not_loaded(self):
        host = ModelHost(FakeBackend(None))
        status, body = host.handle("GET", "/health", None)
        self.assertEqual((status, body["error"]["code"]), (503, "unavailable"))


if __name__ == "__main__":
    unittest.main()


class BacklogTest(unittest.TestCase):
    def test_many_clients_connect_while_the_server_is_busy(self):
        """64 clients connecting before the host accepts any (its threads busy, as a
        batching host's are) all get through: none is refused with EAGAIN."""
        import socket
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "h.sock")
            server, _ = protocol.make_server(protocol.ModelHost(FakeBackend(None)), socket_path=path)
            clients = []
            try:
                for _ in range(64):  # nobody accepts: only the backlog holds them
                    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    c.setblocking(False)
                    c.connect(path)  # raises BlockingIOError (EAGAIN) past the backlog
                    clients.append(c)
            finally:
                for c in clients:
                    c.close()
                server.server_close()
            self.assertEqual(len(clients), 64)
