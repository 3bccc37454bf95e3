#!/bin/bash
cd /tmp/i44/ab
for r in 1 2 3; do
  for cfg in "131072 default" "32768 default" "32768 0" "65536 default" "16384 default"; do
    set -- $cfg
    b=""; [ "$2" = 0 ] && b="--unsent-budget 0"
    XLOWAT=$1 python3 /tmp/i44/h2rcell.py "lowat$1-b$2" ./staticd-xturn --root www --port 18095 --bind 127.0.0.1 --threads 2 --log-format off $b -- http://127.0.0.1:18095/1m.bin
  done
  python3 /tmp/i44/h2rcell.py h2o h2o -c h2o.conf -- http://127.0.0.1:18091/1m.bin; pkill -x h2o; sleep 0.3
done
