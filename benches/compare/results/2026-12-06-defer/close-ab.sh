#!/usr/bin/env bash
# VARIANTS="a b" ROUNDS=N close-ab.sh DIR: Connection: close cells (wrk -t2 -c50, 3 s, every
# request "Connection: close") at 1 B, 1 KB, 10 KB and 100 KB: staticd-VARIANT binaries
# beside h2o (h2o.conf, cleartext 18091), the order rotating each round.
set -eu
cd "$1"
S="--root www --port 18092 --bind 127.0.0.1 --log-format off"
order=($VARIANTS h2o)
for round in $(seq "$ROUNDS"); do
  for f in 1b.bin 1k.bin 10k.bin 100k.bin; do
    for v in "${order[@]}"; do
      if [ $v = h2o ]; then
        CLOSE=1 ./cell.py "r$round h2o" h2o -c "$PWD/h2o.conf" -- http://127.0.0.1:18091/$f 50 3
      else
        CLOSE=1 ./cell.py "r$round $v" ./staticd-$v $S -- http://127.0.0.1:18092/$f 50 3
      fi
    done
  done
  order=("${order[@]:1}" "${order[0]}")
done
