"""torch.cuda stand-in: memory counters that the stand-in model moves."""

import os
import threading


class OutOfMemoryError(RuntimeError):
    pass


_lock = threading.Lock()
_allocated = 0
_reserved = 0
_peak_allocated = 0
_peak_reserved = 0


def is_available():
    return True


def synchronize():
    pass


def manual_seed_all(seed):
    pass


def memory_allocated():
    return _allocated


def memory_reserved():
    return _reserved


def max_memory_allocated():
    return _peak_allocated


def max_memory_reserved():
    return _peak_reserved


def reset_peak_memory_stats():
    global _peak_allocated, _peak_reserved
    with _lock:
        _peak_allocated, _peak_reserved = _allocated, _reserved


def empty_cache():
    global _reserved
    with _lock:
        _reserved = _allocated
    path = os.environ.get("INDEXTTS_STANDIN_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write("empty_cache -\n")


def mem_get_info():
    """(free, total) bytes: INDEXTTS_STANDIN_FREE_BYTES (default 70 GiB) of 80 GiB."""
    total = 80 << 30
    return int(os.environ.get("INDEXTTS_STANDIN_FREE_BYTES") or (70 << 30)), total


def get_device_name(index=0):
    return "Stand-in GPU"


def _alloc(n):
    """Stand-in only: allocate n bytes through the caching allocator."""
    global _allocated, _reserved, _peak_allocated, _peak_reserved
    with _lock:
        _allocated += n
        _reserved = max(_reserved, _allocated)
        _peak_allocated = max(_peak_allocated, _allocated)
        _peak_reserved = max(_peak_reserved, _reserved)


def _free(n):
    """Stand-in only: return n bytes to the cache (reserved stays)."""
    global _allocated
    with _lock:
        _allocated = max(0, _allocated - n)
