"""torch.cuda stand-in: memory counters that the stand-in model moves."""

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
