#!/usr/bin/env bash
# The bound at 128, 256, 512 and 1024 KiB: keep-alive 10 MB and Connection: close
# 1 MB, 50 connections, 2 rounds (staticd-exp2 as in wakes.sh; cell.py as in
# unsent-ab.sh). Usage: sweep.sh DIR
set -eu
cd "$1"
for round in 1 2; do
  for u in 131072 262144 524288 1048576; do
    EXP_UNSENT=$u ./cell.py "r$round keep-alive unsent=$u" ./staticd-exp2 --root www --port 18092 --bind 127.0.0.1 --log-format off -- http://127.0.0.1:18092/10m.bin 50 3
    CLOSE=1 EXP_UNSENT=$u ./cell.py "r$round close unsent=$u" ./staticd-exp2 --root www --port 18092 --bind 127.0.0.1 --log-format off -- http://127.0.0.1:18092/1m.bin 50 3
  done
done
