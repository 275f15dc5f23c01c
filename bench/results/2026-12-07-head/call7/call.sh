#!/bin/bash
# Call 7 (2026-12-07, third session): call 6 again, for its H200 part, which has not run.
# On a card under 100 GB it stops at once: call 6 ran the hosts' tests on an H100.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
MEM=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if [ "$MEM" -lt 100000 ]; then echo "== not an H200: nothing to run"; exit 0; fi
exec bash bench/results/2026-12-07-head/call6/call.sh
