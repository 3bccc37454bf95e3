#!/usr/bin/env bash
# VARIANTS="a b" ROUNDS=N small-h2-ab.sh DIR: h2c 1 KB (h2load -t2 -c50 -m10) and HTTP/1.1
# keep-alive 1 KB (wrk c=50, 3 s), staticd-VARIANT binaries alternated, order rotating.
set -eu
cd "$1"
S="--root www --port 18092 --bind 127.0.0.1 --log-format off"
order=($VARIANTS)
for round in $(seq "$ROUNDS"); do
  for v in "${order[@]}"; do ./h2cell.py "r$round h2c $v" ./staticd-$v $S -- http://127.0.0.1:18092/1k.bin 1; done
  for v in "${order[@]}"; do ./cell.py "r$round h1 $v" ./staticd-$v $S -- http://127.0.0.1:18092/1k.bin 50 3; done
  order=("${order[@]:1}" "${order[0]}")
done
