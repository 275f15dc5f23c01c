"""Test helpers: start a host as a subprocess against the stand-ins and talk to it."""

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import wave

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(HERE, "testdata", "standin")


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("model-host", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Host:
    """A host process: start() waits for the LISTENING line; call() speaks the protocol."""

    def __init__(self, script, args=(), env=None, workdir=None):
        self.workdir = workdir or tempfile.mkdtemp(prefix="dubstudio-host-")
        self.socket = os.path.join(self.workdir, "host.sock")
        self.script = os.path.join(HERE, script)
        self.args = list(args)
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = STANDIN + os.pathsep + self.env.get("PYTHONPATH", "")
        self.env.update(env or {})
        self.proc = None
        self.address = None
        self.stderr = None

    def start(self, wait_ready=True):
        self.stderr = open(os.path.join(self.workdir, "stderr.log"), "wb")
        self.proc = subprocess.Popen(
            [sys.executable, self.script, "--socket", self.socket] + self.args,
            stdout=subprocess.PIPE, stderr=self.stderr, env=self.env)
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"host did not start: {line!r}\n{self.log()}")
        self.address = line.split(" ", 1)[1]
        if wait_ready:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.call("GET", "/health")
            if status == 200:
                return body
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"host not ready: {status} {body}\n{self.log()}")
            time.sleep(0.02)

    def call(self, method, path, body=None, raw=None):
        conn = UnixHTTPConnection(self.socket)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            self.last_content_type = resp.getheader("Content-Type")
            return resp.status, json.loads(payload) if payload else None
        finally:
            conn.close()

    def log(self):
        try:
            with open(os.path.join(self.workdir, "stderr.log"), "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.proc.stdout.close()
        if self.stderr:
            self.stderr.close()


def write_wav(path, seconds=1.0, rate=16000, freq=220):
    import math
    import struct

    n = int(seconds * rate)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(5000 * math.sin(2 * math.pi * freq * i / rate)))
                               for i in range(n)))
    return path


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def rmtree(path):
    shutil.rmtree(path, ignore_errors=True)
