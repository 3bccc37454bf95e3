#!/usr/bin/env bash
# keep-alive c=50 at 1 B and 1 KB: staticd at 287401f (the 2026-12-02 run's code) against
# c832afc (the 2026-12-05 run's), 3 rounds alternated. Usage: small-ab.sh DIR
set -eu
cd "$1"
for round in 1 2 3; do
  for f in 1b.bin 1k.bin; do
    order="staticd-287401f staticd-main"
    [ $round = 2 ] && order="staticd-main staticd-287401f"
    for b in $order; do
      ./cell.py "r$round $b" ./$b --root www --port 18092 --bind 127.0.0.1 --log-format off -- http://127.0.0.1:18092/$f 50 3
    done
  done
done
