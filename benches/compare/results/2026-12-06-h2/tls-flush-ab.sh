#!/usr/bin/env bash
# h2 (TLS) 1 MB, 3 rounds in rotating order: main (1a28001), gather (what
# ships: a turn's records sealed block by block and written at its end),
# gather2 (the same, the records of each 64 KiB block flushed before the
# next: "more follows" not passed over TLS), h2o. Output: tls-flush-ab.txt.
set -eu
cd "$1"
S="--root www --port 18092 --bind 127.0.0.1 --log-format off"
T="--tls-cert cert.pem --tls-key key.pem"
order=(main gather gather2 h2o)
for round in 1 2 3; do
  for f in 1m.bin; do
    for v in "${order[@]}"; do
      if [ $v = h2o ]; then ./h2cell.py "r$round https h2o" h2o -c "$PWD/h2o.conf" -- https://127.0.0.1:18093/$f 1
      else ./h2cell.py "r$round https $v" ./staticd-$v $S $T -- https://127.0.0.1:18092/$f 1; fi
    done
  done
  order=("${order[@]:1}" "${order[0]}")
done
