#!/usr/bin/env bash
# The unsent-limit A/B of docs/performance.md "Large files: whose CPU":
# staticd with the unsent queue bounded at 128 KiB (what it ships) and at
# 4 MiB (Debian's tcp_wmem maximum, about what nginx's autotuned buffer
# reaches), beside nginx, alternated over 3 rounds. staticd-exp is staticd
# at c832afc with unsent-limit.patch applied (the bound read from
# EXP_UNSENT), built with `cargo build --release`.
# Usage: unsent-ab.sh DIR (DIR holds staticd-exp, nginx.conf, www/ with 1m.bin and 10m.bin)
set -eu
cd "$1"
for round in 1 2 3; do
  for cell in "10m.bin 50 3" "1m.bin 50 3" "10m.bin 2000 5"; do
    set -- $cell
    order="nginx 131072 4194304"
    [ $round = 2 ] && order="131072 4194304 nginx"
    [ $round = 3 ] && order="4194304 nginx 131072"
    for v in $order; do
      if [ $v = nginx ]; then
        ./cell.py "r$round nginx" nginx -c "$PWD/nginx.conf" -- http://127.0.0.1:18090/$1 $2 $3
      else
        EXP_UNSENT=$v ./cell.py "r$round unsent=$v" ./staticd-exp --root www --port 18092 --bind 127.0.0.1 --log-format off -- http://127.0.0.1:18092/$1 $2 $3
      fi
    done
  done
done
