#!/bin/bash
# one host: processes in a row, free and pinned alternately, then plants
nvidia-smi --query-gpu=name,uuid --format=csv,noheader
for i in 1 2 3 4; do
  python3 docs/probes/host_time.py free f$i
  python3 docs/probes/host_time.py pinned p$i
done
for p in py50 hooks sleep; do python3 docs/probes/host_time.py pinned plant $p; done
