#!/bin/bash
cd /tmp/i44/ab
for r in 1 2 3; do
  for cfg in "327680 0" "81920 65536" "327680 65536" "163840 131072"; do
    set -- $cfg
    XBLOCK=$1 XTURN=$2 python3 /tmp/i44/h2rcell.py "b$1-t$2" ./staticd-xturn --root www --port 18095 --bind 127.0.0.1 --threads 2 --log-format off -- http://127.0.0.1:18095/1m.bin
  done
  python3 /tmp/i44/h2rcell.py h2o h2o -c h2o.conf -- http://127.0.0.1:18091/1m.bin; pkill -x h2o; sleep 0.3
done
