"""dubstudio model-host protocol, the Python side.

A model host is one process serving one model on one GPU over JSON/HTTP, on a unix
socket or loopback TCP. This module holds what every host shares: the HTTP server, the
error codes and their statuses, request validation, per-request GPU peak measurement
and WAV inspection. docs/engines.md is the reference; tts/protocol.go is the Go side.

A host supplies a backend object with:

    load()                      load the model (called once, in the main thread)
    info() -> dict              model, version, sample_rate, duration_control, emotion_text
    prepare(req: dict) -> dict  {"cache_path", "computed", "seconds"}
    synthesize(req: Synthesis) -> dict   the tts.Result fields the backend knows
    on_oom()                    optional: drop state after CUDA out of memory

and calls run_host(backend, options). Only the standard library is imported at module
level; torch is imported lazily, so the protocol works (and is tested) without it.
"""

import contextlib
import gc
import hashlib
import io
import json
import math
import os
import queue
import re
import signal
import socket
import socketserver
import struct
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROTOCOL_VERSION = 1

# Error codes and the HTTP status each is answered with.
INVALID_INPUT = "invalid_input"
OUT_OF_MEMORY = "out_of_memory"
INTERNAL = "internal"
UNAVAILABLE = "unavailable"
# Refinements of invalid_input with their own user-facing text: the line is too long for
# the model (a segment or its speech past the caps), or asks for what the engine does not
# support (a language it does not know).
TEXT_TOO_LONG = "text_too_long"
UNSUPPORTED = "unsupported"
STATUS = {INVALID_INPUT: 400, OUT_OF_MEMORY: 507, INTERNAL: 500, UNAVAILABLE: 503, TEXT_TOO_LONG: 400, UNSUPPORTED: 400}

MAX_BODY_BYTES = 1 << 20
MAX_TEXT_RUNES = 5000
MAX_EMOTION_SUM = 0.8
EMOTION_MODES = ("speaker", "audio", "vector", "text")
DEFAULT_MAX_MEL_TOKENS = 1500
DEFAULT_MAX_TEXT_TOKENS_PER_SEGMENT = 120


class HostError(Exception):
    """A failure with a protocol error code."""

    def __init__(self, code, message, tb=""):
        super().__init__(message)
        self.code = code if code in STATUS else INTERNAL
        self.message = message
        self.traceback = tb

    @property
    def status(self):
        return STATUS[self.code]

    def body(self):
        err = {"code": self.code, "message": self.message}
        if self.traceback:
            err["traceback"] = self.traceback
        return {"error": err}


def invalid(message):
    return HostError(INVALID_INPUT, message)


# ---------------------------------------------------------------------------------------
# Requests


@dataclass
class Emotion:
    mode: str = "speaker"
    audio_path: str = ""
    weight: float = 1.0
    vector: list = field(default_factory=lambda: [0.0] * 8)
    text: str = ""


@dataclass
class Synthesis:
    """A validated, normalized /synthesize request (the JSON form of tts.Request)."""

    text: str
    output_path: str
    language: str = ""
    reference_audio_path: str = ""
    conditioning_path: str = ""
    voice: str = ""
    emotion: Emotion = field(default_factory=Emotion)
    duration_factor: float = 0.0
    target_seconds: float = 0.0
    max_mel_tokens: int = DEFAULT_MAX_MEL_TOKENS
    max_text_tokens_per_segment: int = DEFAULT_MAX_TEXT_TOKENS_PER_SEGMENT
    seed: int = 0
    # An editor's retake (tts.Request.First): a batching host admits it, and runs its
    # s2mel, ahead of the other lines it holds. A version-1 host runs one line at a
    # time and has nothing to reorder.
    first: bool = False


def _number(d, key, default=0.0):
    v = d.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise invalid(f"{key} must be a number")
    v = float(v)
    if math.isnan(v) or math.isinf(v):
        raise invalid(f"{key} must be finite")
    return v


def _integer(d, key, default=0):
    v = d.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
        raise invalid(f"{key} must be an integer")
    return int(v)


def _boolean(d, key):
    v = d.get(key, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise invalid(f"{key} must be true or false")
    return v


def _string(d, key):
    v = d.get(key, "")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise invalid(f"{key} must be a string")
    return v


def _object(d, key):
    v = d.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise invalid(f"{key} must be an object")
    return v


def parse_synthesis(d):
    """Validates a /synthesize body with the rules of tts.Request.Validate and returns it
    normalized (defaults filled in, emotion vector scaled to sum at most 0.8)."""
    if not isinstance(d, dict):
        raise invalid("request must be a JSON object")
    text = _string(d, "text")
    if not text.strip():
        raise invalid("text is empty")
    if "\x00" in text:
        raise invalid("text contains a NUL character")
    if len(text) > MAX_TEXT_RUNES:
        raise invalid(f"text has {len(text)} characters, more than {MAX_TEXT_RUNES}")
    out = _string(d, "output_path")
    if not out:
        raise invalid("output path is empty")
    factor = _number(d, "duration_factor")
    if factor != 0 and not 0.5 <= factor <= 2.0:
        raise invalid(f"duration factor {factor:g} is outside 0.5..2")
    target = _number(d, "target_seconds")
    if target < 0:
        raise invalid(f"target seconds {target:g} is negative")
    mel = _integer(d, "max_mel_tokens") or DEFAULT_MAX_MEL_TOKENS
    seg = _integer(d, "max_text_tokens_per_segment") or DEFAULT_MAX_TEXT_TOKENS_PER_SEGMENT
    if mel < 0 or seg < 0:
        raise invalid("token limits must not be negative")
    spk = _object(d, "speaker")
    emo = parse_emotion(_object(d, "emotion"))
    return Synthesis(
        text=text,
        output_path=out,
        language=_string(d, "language"),
        reference_audio_path=_string(spk, "reference_audio_path"),
        conditioning_path=_string(spk, "conditioning_path"),
        voice=_string(spk, "voice"),
        emotion=emo,
        duration_factor=factor,
        target_seconds=target,
        max_mel_tokens=mel,
        max_text_tokens_per_segment=seg,
        seed=_integer(d, "seed"),
        first=_boolean(d, "first"),
    )


def parse_emotion(e):
    mode = _string(e, "mode") or "speaker"
    if mode not in EMOTION_MODES:
        raise invalid(f"unknown emotion mode {mode!r}")
    weight = _number(e, "weight") or 1.0
    if not 0 <= weight <= 1:
        raise invalid(f"emotion weight {weight:g} is outside 0..1")
    em = Emotion(mode=mode, weight=weight)
    if mode == "audio":
        em.audio_path = _string(e, "audio_path")
        if not em.audio_path:
            raise invalid("emotion mode audio needs an emotion reference recording")
    elif mode == "text":
        em.text = _string(e, "text")
    elif mode == "vector":
        vec = e.get("vector")
        if not isinstance(vec, list) or len(vec) != 8:
            raise invalid("emotion vector must have 8 values")
        values = []
        for i, v in enumerate(vec):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise invalid(f"emotion vector value {i} is not a number in 0..1")
            values.append(float(v))
        total = sum(values)
        if total == 0:
            raise invalid("emotion vector is all zero")
        if total > MAX_EMOTION_SUM:
            values = [v * MAX_EMOTION_SUM / total for v in values]
        em.vector = values
    return em


def parse_prepare(d):
    if not isinstance(d, dict):
        raise invalid("request must be a JSON object")
    ref = _string(d, "reference_audio_path")
    if not ref:
        raise invalid("reference audio path is empty")
    sha = _string(d, "reference_sha256").lower()
    if sha and not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise invalid("reference_sha256 must be 64 hex digits")
    return ref, sha, _string(d, "cache_dir")


def require_file(path, what):
    if not path:
        raise invalid(f"{what} is empty")
    if not os.path.isfile(path):
        raise invalid(f"{what} {path} does not exist")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_text(s):
    """Hex SHA-256 of a string's UTF-8 bytes."""
    return hashlib.sha256(s.encode()).hexdigest()


def safe_name(s):
    return re.sub(r"[^A-Za-z0-9._@+-]", "_", s)


# ---------------------------------------------------------------------------------------
# Speaker conditioning cache files

CACHE_FORMAT = 1


class ConditioningStore:
    """Cache files of speaker conditioning, one per reference audio (SHA-256) and model
    version: <cache_dir>/<sha256>-<version>.pt, written with torch.save through a
    temporary file renamed into place. A file of another format, version or reference,
    or an unreadable one, counts as absent."""

    def __init__(self, version, torch_module):
        self.version = version
        self.torch = torch_module

    def path(self, cache_dir, sha):
        return os.path.join(cache_dir, f"{sha}-{safe_name(self.version)}.pt")

    def save(self, path, sha, tensors):
        """Saves tensors (moved to the CPU) for reference sha."""
        d = os.path.dirname(path) or "."
        os.makedirs(d, exist_ok=True)
        doc = {"format": CACHE_FORMAT, "model_version": self.version, "reference_sha256": sha,
               "tensors": {k: _cpu(v) for k, v in tensors.items()}}
        fd, tmp = tempfile.mkstemp(prefix=".cond-", suffix=".tmp", dir=d)
        os.close(fd)
        try:
            self.torch.save(doc, tmp)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def load(self, path, device, required, sha=None):
        """Returns (tensors on device, reference sha) or None."""
        if not path or not os.path.isfile(path):
            return None
        try:
            try:
                doc = self.torch.load(path, map_location=device, weights_only=True)
            except TypeError:  # a torch without weights_only
                doc = self.torch.load(path, map_location=device)
        except Exception as e:  # noqa: BLE001 (a damaged file is recomputed)
            print(f"host: ignoring unreadable conditioning cache {path}: {e}", file=sys.stderr)
            return None
        if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT or doc.get("model_version") != self.version:
            return None
        if sha and doc.get("reference_sha256") != sha:
            return None
        tensors = doc.get("tensors")
        if not isinstance(tensors, dict) or any(k not in tensors for k in required):
            return None
        return {k: _to(v, device) for k, v in tensors.items()}, doc.get("reference_sha256")


def _cpu(x):
    if hasattr(x, "detach"):
        x = x.detach()
    return x.cpu() if hasattr(x, "cpu") else x


def _to(x, device):
    return x.to(device) if hasattr(x, "to") else x


# ---------------------------------------------------------------------------------------
# WAV


def wav_info(path):
    """Returns (sample_rate, seconds) of a RIFF/WAVE file, any sample format, reading
    only its headers."""
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            raise ValueError(f"{path} is not a WAV file")
        rate = block = 0
        while True:
            ch = f.read(8)
            if len(ch) < 8:
                raise ValueError(f"{path} has no data chunk")
            cid, size = ch[:4], struct.unpack("<I", ch[4:])[0]
            if cid == b"fmt ":
                fmt = f.read(size)
                if len(fmt) < 16:
                    raise ValueError(f"{path} has a short fmt chunk")
                _, _, rate, _, block = struct.unpack("<HHIIH", fmt[:14])
                if size % 2:
                    f.read(1)
            elif cid == b"data":
                if not rate or not block:
                    raise ValueError(f"{path} has data before fmt")
                if size == 0xFFFFFFFF or size == 0:  # streamed writers leave it open
                    size = os.path.getsize(path) - f.tell()
                size = min(size, os.path.getsize(path) - f.tell())
                return rate, size / (rate * block)
            else:
                f.seek(size + (size % 2), os.SEEK_CUR)


# ---------------------------------------------------------------------------------------
# GPU memory measurement


class Meter:
    """Measures CUDA memory with torch, imported lazily; everything reads 0 without torch
    or without CUDA. The same measurement serves the real and the benchmark host."""

    def __init__(self):
        self._torch = None
        self._checked = False

    def torch(self):
        if not self._checked:
            self._checked = True
            try:
                import torch  # noqa: PLC0415 (lazy on purpose)

                self._torch = torch
            except ImportError:
                self._torch = None
        return self._torch

    def cuda(self):
        t = self.torch()
        try:
            return t.cuda if t is not None and t.cuda.is_available() else None
        except Exception:  # a broken driver must not break the protocol
            return None

    def allocated(self):
        c = self.cuda()
        return int(c.memory_allocated()) if c else 0

    def reserved(self):
        c = self.cuda()
        return int(c.memory_reserved()) if c else 0

    def reset_peak(self):
        c = self.cuda()
        if c:
            c.reset_peak_memory_stats()

    def peaks(self):
        """(max allocated, max reserved) since reset_peak."""
        c = self.cuda()
        if not c:
            return 0, 0
        return int(c.max_memory_allocated()), int(c.max_memory_reserved())

    def synchronize(self):
        c = self.cuda()
        if c:
            c.synchronize()

    def empty_cache(self):
        gc.collect()
        c = self.cuda()
        if c:
            c.empty_cache()

    def release_cache(self):
        before = self.reserved()
        self.empty_cache()
        return {"reserved_before": before, "reserved_after": self.reserved(), "allocated": self.allocated()}

    def is_oom(self, exc):
        t = self.torch()
        oom = getattr(getattr(t, "cuda", None), "OutOfMemoryError", None) if t is not None else None
        if oom is not None and isinstance(exc, oom):
            return True
        # Older torch raised a plain RuntimeError; cuBLAS/cuDNN allocation failures too,
        # and cuDNN's attention graph fails to execute when it cannot get its workspace
        # (seen on an H200 filled to the last gigabyte).
        msg = str(exc)
        return isinstance(exc, RuntimeError) and (
            "CUDA out of memory" in msg or "CUBLAS_STATUS_ALLOC_FAILED" in msg or "CUDNN_STATUS_ALLOC_FAILED" in msg
            or "mha_graph.execute" in msg
        )

    def seed(self, seed):
        import random

        random.seed(seed)
        try:
            import numpy  # noqa: PLC0415

            numpy.random.seed(seed % (1 << 32))
        except ImportError:
            pass
        t = self.torch()
        if t is not None:
            t.manual_seed(seed)
            c = self.cuda()
            if c:
                c.manual_seed_all(seed)


# ---------------------------------------------------------------------------------------
# Capturing the model's stage timings

_STAGE_LINES = {
    "gpt_gen_time": "gpt",
    "gpt_forward_time": "gpt_forward",
    "s2mel_time": "s2mel",
    "bigvgan_time": "vocoder",
    "Total inference time": "infer",
}
_STAGE_RE = re.compile(r">> (" + "|".join(re.escape(k) for k in _STAGE_LINES) + r"): ([0-9.]+) seconds")


class _Tee(io.TextIOBase):
    def __init__(self, sink):
        self.sink = sink
        self.buf = io.StringIO()

    def write(self, s):
        self.buf.write(s)
        try:
            self.sink.write(s)
        except Exception:
            pass
        return len(s)

    def flush(self):
        with contextlib.suppress(Exception):
            self.sink.flush()


@contextlib.contextmanager
def capture_stages(stages):
    """Runs the body with stdout teed to stderr and adds the stage timings that IndexTTS
    prints (">> gpt_gen_time: 1.23 seconds") to the stages dict."""
    tee = _Tee(sys.stderr)
    with contextlib.redirect_stdout(tee):
        try:
            yield
        finally:
            for m in _STAGE_RE.finditer(tee.buf.getvalue()):
                stages[_STAGE_LINES[m.group(1)]] = float(m.group(2))


# ---------------------------------------------------------------------------------------
# The host


class ModelThread:
    """Runs every model call on one long-lived thread. CUDA libraries keep per-thread
    state (cuBLAS and cuDNN handles and workspaces); a new HTTP handler thread per request
    would pay for it on every request, so handlers hand their work to this thread."""

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="model", daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            fn, box, done = self.jobs.get()
            try:
                box["result"] = fn()
            except BaseException as e:  # noqa: BLE001 (handed back to the caller)
                box["error"] = e
            finally:
                done.set()

    def call(self, fn):
        """Runs fn on the model thread and returns its result or raises its exception.
        Waits in short slices so that signals reach a main thread that waits here."""
        box = {}
        done = threading.Event()
        self.jobs.put((fn, box, done))
        while not done.wait(0.2):
            pass
        if "error" in box:
            raise box.pop("error")
        return box["result"]


def host_error(exc, meter):
    """The protocol error for an exception raised by model code: out of memory (the
    one retryable failure), a missing file (the request's fault), anything else
    internal; with the traceback."""
    if isinstance(exc, HostError):
        return exc
    tb = traceback.format_exc()
    if meter.is_oom(exc):
        return HostError(OUT_OF_MEMORY, str(exc) or "CUDA out of memory", tb)
    if isinstance(exc, FileNotFoundError):
        return HostError(INVALID_INPUT, str(exc), tb)
    return HostError(INTERNAL, f"{type(exc).__name__}: {exc}", tb)


def read_output(res, start):
    """Completes a /synthesize response from the WAV the model wrote: its sample rate
    and length, and the request's total time since start."""
    try:
        rate, secs = wav_info(res["output_path"])
    except (OSError, ValueError) as e:
        raise HostError(INTERNAL, f"the model wrote no readable WAV: {e}") from None
    res["sample_rate"] = rate
    res["audio_seconds"] = secs
    res.setdefault("stages", {})["total"] = time.perf_counter() - start
    return res


class Host:
    """What every model host shares, independent of HTTP: the routes, the loading
    state, the counters. A subclass gives health(), _prepare, _synthesize, _release
    and _run(fn, body), which runs a route's handler where the model runs."""

    def __init__(self, meter=None):
        self.meter = meter or Meter()
        self.state_lock = threading.Lock()
        self.loaded = False
        self.resident = 0
        self.counters = {"requests": 0, "ooms": 0, "errors": 0, "conditioning_computed": 0, "conditioning_loaded": 0}

    def count(self, name, n=1):
        with self.state_lock:
            self.counters[name] = self.counters.get(name, 0) + n

    def handle(self, method, path, body):
        """Returns (status, response dict) for one request."""
        try:
            if path == "/health":
                if method != "GET":
                    raise HostError(INTERNAL, "method not allowed")
                return 200, self.health()
            routes = {"/prepare": self._prepare, "/synthesize": self._synthesize, "/release_cache": self._release}
            fn = routes.get(path)
            if fn is None:
                return 404, HostError(INTERNAL, f"unknown path {path}").body()
            if method != "POST":
                return 405, HostError(INTERNAL, "method not allowed").body()
            if not self.loaded:
                raise HostError(UNAVAILABLE, "loading model")
            try:
                return 200, self._run(fn, body)
            except HostError as e:
                self.count("errors")
                if e.code == OUT_OF_MEMORY:
                    self.count("ooms")
                raise
        except HostError as e:
            return e.status, e.body()

    def _counted_prepare(self, prepare, body):
        start = time.perf_counter()
        res = prepare(body)
        self.count("conditioning_computed" if res.get("computed") else "conditioning_loaded")
        res.setdefault("seconds", time.perf_counter() - start)
        return res


class ModelHost(Host):
    """A version-1 host: one request at a time, all on one thread."""

    def __init__(self, backend, meter=None):
        super().__init__(meter)
        self.backend = backend
        self.model = ModelThread()
        self.busy = 0
        self.queued = 0

    def load(self):
        def load():
            self.backend.load()
            self.meter.synchronize()
            return self.meter.allocated()

        self.resident = self.model.call(load)
        self.loaded = True

    def health(self):
        if not self.loaded:
            raise HostError(UNAVAILABLE, "loading model")
        info = dict(self.backend.info())
        with self.state_lock:
            info.update(
                protocol=PROTOCOL_VERSION,
                resident_bytes=self.resident,
                reserved_bytes=self.meter.reserved(),
                concurrency=1,
                busy=self.busy,
                queued=self.queued,
                counters=dict(self.counters),
            )
        return info

    def _run(self, fn, body):
        return self._serialized(fn, body)

    def _serialized(self, fn, body):
        with self.state_lock:
            self.queued += 1
        return self.model.call(lambda: self._guarded(fn, body))

    def _guarded(self, fn, body):
        """Runs fn(body) on the model thread and turns every failure into a HostError."""
        with self.state_lock:
            self.queued -= 1
            self.busy += 1
        oom = False
        try:
            return fn(body)
        except Exception as e:  # noqa: BLE001 (every failure becomes a protocol error)
            err = host_error(e, self.meter)
            oom = err.code == OUT_OF_MEMORY
            if err is e:
                raise
            raise err from None
        finally:
            if oom:
                # The exception and its frames are gone: the memory they held can go.
                with contextlib.suppress(Exception):
                    if hasattr(self.backend, "on_oom"):
                        self.backend.on_oom()
                self.meter.empty_cache()
            with self.state_lock:
                self.busy -= 1

    def _prepare(self, body):
        return self._counted_prepare(self.backend.prepare, body)

    def _synthesize(self, body):
        req = parse_synthesis(body)
        self.count("requests")
        start = time.perf_counter()
        self.meter.synchronize()
        self.meter.reset_peak()
        res = self.backend.synthesize(req)
        self.meter.synchronize()
        alloc, reserved = self.meter.peaks()
        res["peak_allocated_bytes"] = alloc
        res["peak_reserved_bytes"] = reserved
        res.setdefault("output_path", req.output_path)
        return read_output(res, start)

    def _release(self, _body):
        return self.meter.release_cache()


# ---------------------------------------------------------------------------------------
# HTTP


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "dubstudio-host/1"

    def address_string(self):
        return "local"

    def log_message(self, format, *args):  # noqa: A002 (BaseHTTPRequestHandler's name)
        if getattr(self.server, "verbose", False):
            sys.stderr.write("host: " + (format % args) + "\n")

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def _dispatch(self, method):
        try:
            body = None
            length = int(self.headers.get("Content-Length") or 0)
            if length < 0 or length > MAX_BODY_BYTES:
                self.close_connection = True
                raise invalid(f"request body larger than {MAX_BODY_BYTES} bytes")
            raw = self.rfile.read(length) if length else b""
            if method == "POST":
                try:
                    body = json.loads(raw.decode("utf-8") if raw else "{}")
                except (UnicodeDecodeError, json.JSONDecodeError) as e:
                    raise invalid(f"request is not JSON: {e}") from None
            status, obj = self.server.host.handle(method, self.path.split("?", 1)[0], body)
        except HostError as e:
            status, obj = e.status, e.body()
        except ValueError as e:  # bad Content-Length
            self.close_connection = True
            status, obj = 400, invalid(str(e)).body()
        data = json.dumps(obj, allow_nan=False, default=str).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# The listen backlog. socketserver's default of 5 made a batching host's clients fail
# with EAGAIN ("resource temporarily unavailable") on an H200 when 64 lines connected at
# once while the host's threads were busy: the worker took the host for lost.
LISTEN_BACKLOG = 1024


class _TCPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def get_request(self):
        conn, _ = self.socket.accept()
        return conn, ("local", 0)


def make_server(host, socket_path=None, port=None, verbose=False):
    """Binds the protocol on a unix socket or on 127.0.0.1:port and returns (server,
    address) where address is "unix:/path" or "127.0.0.1:PORT"."""
    if (socket_path is None) == (port is None):
        raise ValueError("give exactly one of socket_path and port")
    if socket_path is not None:
        with contextlib.suppress(FileNotFoundError):
            if os.path.exists(socket_path) and not _is_socket(socket_path):
                raise ValueError(f"{socket_path} exists and is not a socket")
            os.unlink(socket_path)
        old = os.umask(0o177)  # the socket is for this user only
        try:
            server = _UnixServer(socket_path, _Handler)
        finally:
            os.umask(old)
        address = "unix:" + socket_path
    else:
        server = _TCPServer(("127.0.0.1", int(port)), _Handler)
        address = "127.0.0.1:%d" % server.server_address[1]
    server.host = host
    server.verbose = verbose
    return server, address


def _is_socket(path):
    import stat

    return stat.S_ISSOCK(os.stat(path).st_mode)


def env(name, default=None):
    v = os.environ.get(name)
    return default if v is None or v == "" else v


def env_bool(name, default=None):
    v = env(name)
    if v is None:
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")


def add_listen_args(parser):
    parser.add_argument("--socket", default=env("DUBSTUDIO_HOST_SOCKET"), help="unix socket path")
    parser.add_argument(
        "--port", type=int, default=int(env("DUBSTUDIO_HOST_PORT", "-1")), help="loopback TCP port (0: any)"
    )
    parser.add_argument("--verbose", action="store_true", default=env_bool("DUBSTUDIO_HOST_VERBOSE", False))


def run_host(backend, args, host=None):
    """Serves backend until SIGTERM/SIGINT: binds, prints "LISTENING <address>" on stdout,
    loads the model (health answers 503 meanwhile), then serves. Exits the process: 0
    after a signal, 1 if loading fails; returns only for bad arguments (2)."""
    socket_path = args.socket or None
    port = None if socket_path or args.port is None or args.port < 0 else args.port
    if socket_path is None and port is None:
        print("host: give --socket or --port", file=sys.stderr)
        return 2
    host = host or ModelHost(backend)
    server, address = make_server(host, socket_path=socket_path, port=port, verbose=args.verbose)

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="http", daemon=True)
    status = 0
    try:
        # In the try from the handlers on: a signal just after LISTENING (before the
        # load starts) is a clean stop too, not a SystemExit that escapes with 143.
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        thread.start()
        print("LISTENING " + address, flush=True)
        sys.stdout = sys.stderr  # models print a lot: keep stdout for the LISTENING line
        try:
            host.load()
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            print("host: loading the model failed", file=sys.stderr)
            status = 1
        else:
            print(f"host: ready on {address}", file=sys.stderr, flush=True)
            idle = threading.Event()
            while not idle.wait(0.5):  # short waits: signals are handled between them
                pass
    except SystemExit as e:
        status = 0 if e.code in (128 + signal.SIGTERM, 128 + signal.SIGINT) else (e.code or 0)
    finally:
        if thread.is_alive():  # shutdown() waits for serve_forever, which a signal may have forestalled
            server.shutdown()
        server.server_close()
        if socket_path:
            with contextlib.suppress(OSError):
                os.unlink(socket_path)
        for stream in (sys.stdout, sys.stderr, sys.__stdout__):
            with contextlib.suppress(Exception):
                stream.flush()
        # Exit now: the model thread may be mid-request, and CUDA's teardown at
        # interpreter exit has been seen to hang.
        os._exit(status)


def free_port():
    """A free loopback port (tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
