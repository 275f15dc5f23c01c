"""A tiny stand-in for torch, for tests of the model hosts without PyTorch.

Only what indextts_host.py and the stand-in indextts package use: Tensor (a data holder),
save/load (pickle), manual_seed with torch's own random generator (the stand-in model
draws from it, so a host that forgets torch.manual_seed gives unrepeatable audio),
version.cuda and the torch.cuda memory counters.
"""

import pickle
import random
import types

from . import cuda  # noqa: F401 (torch.cuda is an attribute of torch)

__version__ = "0.0+standin"
version = types.SimpleNamespace(cuda="12.8")

# torch's generator, separate from Python's random (which the stand-in never uses).
_generator = random.Random()


class Tensor:
    """Carries a list of numbers and a shape; to/cpu/detach return itself."""

    def __init__(self, data, shape=None):
        self.data = list(data)
        self.shape = tuple(shape) if shape is not None else (len(self.data),)

    def to(self, *args, **kwargs):
        return self

    def cpu(self):
        return self

    def detach(self):
        return self

    def tolist(self):
        """Nested lists of the shape, the data repeated or cut to fit (like real torch
        for data that fills the shape)."""
        if len(self.shape) == 2 and self.shape[0] == 1:
            return [list(self.data[: self.shape[1]])]
        return list(self.data)

    def __eq__(self, other):
        return isinstance(other, Tensor) and self.data == other.data and self.shape == other.shape

    def __repr__(self):
        return f"Tensor(shape={self.shape})"


def tensor(data):
    return Tensor(data)


def save(obj, path):
    with open(path, "wb") as f:
        pickle.dump(obj, f)


def load(path, map_location=None, weights_only=None):
    with open(path, "rb") as f:
        return pickle.load(f)


def manual_seed(seed):
    _generator.seed(seed)


def rand():
    """One draw from torch's generator, in [0, 1)."""
    return _generator.random()
