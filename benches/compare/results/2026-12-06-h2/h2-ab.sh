#!/usr/bin/env bash
# The HTTP/2 A/Bs of docs/performance.md "HTTP/2: frames gathered into blocks":
# staticd binaries named staticd-VARIANT beside h2o, alternated over ROUNDS
# rounds (the order rotates each round), h2c and h2 (TLS), 1 MB and 1 KB.
# h2cell.py runs h2load -t2 -c50 -m10 for 3 s after 1 s of warm-up and prints
# req/s, the server's CPU per request and the machine's, both over the 4 s
# (warm-up included, so counted as req/s x 4).
#   h2-ab-blocks.txt: VARIANTS="main g64 g256" ROUNDS=5, where main is
#     1a28001 (each DATA payload its own sendfile(2) in h2c, its own TLS
#     records over HTTPS), g64 gathers frames and payloads into 64 KiB blocks
#     kept across waits, g256 the same with 256 KiB blocks (gather.rs's BLOCK
#     and pool.rs's MAX_KEPT_BYTES raised).
#   h2-ab.txt: VARIANTS="main gather" ROUNDS=5, gather being what ships:
#     256 KiB blocks in cleartext, 64 KiB over TLS, let go before each wait.
# Usage: VARIANTS="..." ROUNDS=N h2-ab.sh DIR (DIR holds the staticd-*
# binaries, h2cell.py, cert.pem, key.pem, h2o.conf, www/ with 1k.bin and 1m.bin)
set -eu
cd "$1"
S="--root www --port 18092 --bind 127.0.0.1 --log-format off"
T="--tls-cert cert.pem --tls-key key.pem"
order=($VARIANTS h2o)
for round in $(seq "$ROUNDS"); do
  for cell in "http 1m.bin" "http 1k.bin" "https 1m.bin" "https 1k.bin"; do
    set -- $cell
    for v in "${order[@]}"; do
      if [ $v = h2o ]; then
        port=18091; [ $1 = https ] && port=18093
        ./h2cell.py "r$round $1 h2o" h2o -c "$PWD/h2o.conf" -- $1://127.0.0.1:$port/$2 1
      elif [ $1 = https ]; then
        ./h2cell.py "r$round $1 $v" ./staticd-$v $S $T -- https://127.0.0.1:18092/$2 1
      else
        ./h2cell.py "r$round $1 $v" ./staticd-$v $S -- http://127.0.0.1:18092/$2 1
      fi
    done
  done
  order=("${order[@]:1}" "${order[0]}")
done
