#!/usr/bin/env python3
"""A model host for the GPU worker's fault tests: the protocol of tts/hosts/protocol.py
(standard library only, no torch), a sine wave of the requested length, and a pause
of SLOW_HOST_SECONDS in every synthesis, during which a file busy-<pid> exists in
SLOW_HOST_DIR, so that a test can kill the host in the middle of a line."""

import math
import os
import struct
import sys
import time
import wave

sys.path.insert(0, os.environ["DUBSTUDIO_HOSTS_DIR"])

import protocol  # noqa: E402


class SlowBackend:
    version = "slow-host-v1"

    def load(self):
        pass

    def info(self):
        return {"model": "slow-test", "version": self.version, "sample_rate": 22050, "duration_control": True,
                "emotion_text": False}

    def on_oom(self):
        pass

    def prepare(self, body):
        ref, sha, cache_dir = protocol.parse_prepare(body)
        protocol.require_file(ref, "reference audio")
        sha = sha or protocol.sha256_file(ref)
        path = ""
        if cache_dir:
            os.makedirs(cache_dir, exist_ok=True)
            path = os.path.join(cache_dir, sha + "-" + protocol.safe_name(self.version) + ".cond")
            with open(path, "w") as f:
                f.write(sha)
        return {"cache_path": path, "computed": True}

    def synthesize(self, req):
        busy = os.path.join(os.environ["SLOW_HOST_DIR"], "busy-%d" % os.getpid())
        with open(busy, "w") as f:
            f.write(req.text)
        try:
            time.sleep(float(os.environ.get("SLOW_HOST_SECONDS", "0.5")))
        finally:
            os.unlink(busy)
        seconds = (req.target_seconds or 1.0) * (req.duration_factor or 1.0)
        n = int(seconds * 22050)
        frames = b"".join(struct.pack("<h", int(6000 * math.sin(2 * math.pi * 220 * i / 22050))) for i in range(n))
        with wave.open(req.output_path, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(22050)
            w.writeframes(frames)
        return {"engine": "bench", "model_version": self.version, "tokens": int(seconds * 50),
                "duration_factor": req.duration_factor or 1.0}


def main():
    import argparse

    p = argparse.ArgumentParser()
    protocol.add_listen_args(p)
    return protocol.run_host(SlowBackend(), p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
