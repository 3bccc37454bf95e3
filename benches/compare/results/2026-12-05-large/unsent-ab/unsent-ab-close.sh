#!/usr/bin/env bash
# As unsent-ab.sh, for `Connection: close` with the 1 MB file at 50 connections, and a
# third staticd variant: no bound at all (EXP_UNSENT=-1: the option is not set).
# Usage: unsent-ab-close.sh DIR
set -eu
cd "$1"
export CLOSE=1
for round in 1 2 3; do
  order="nginx 131072 4194304 -1"
  [ $round = 2 ] && order="131072 4194304 -1 nginx"
  [ $round = 3 ] && order="-1 nginx 131072 4194304"
  for v in $order; do
    if [ $v = nginx ]; then
      ./cell.py "r$round nginx" nginx -c "$PWD/nginx.conf" -- http://127.0.0.1:18090/1m.bin 50 3
    else
      EXP_UNSENT=$v ./cell.py "r$round unsent=$v" ./staticd-exp --root www --port 18092 --bind 127.0.0.1 --log-format off -- http://127.0.0.1:18092/1m.bin 50 3
    fi
  done
done
