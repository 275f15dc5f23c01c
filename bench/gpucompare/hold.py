#!/usr/bin/env python3
"""Holds all of a GPU's free memory but the given number of GiB, until stdin closes.

    CUDA_VISIBLE_DEVICES=<uuid> python3 bench/gpucompare/hold.py 24

gpucompare uses it to turn a big card into a smaller studio card: the executor and
the model hosts see a foreign process holding the rest, as on a shared card.
"""
import json
import sys

import torch


def main():
    leave = int(float(sys.argv[1]) * 2**30)
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    n = free - leave
    if n <= 0:
        print(json.dumps({"held": 0, "free": free, "total": total}), flush=True)
    else:
        block = torch.empty(n, dtype=torch.uint8, device="cuda")
        block.fill_(1)  # touch it, so that the driver really maps it
        free, total = torch.cuda.mem_get_info()
        print(json.dumps({"held": n, "free": free, "total": total}), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
