#!/bin/bash
cd /tmp/i44/ab
for r in 1 2 3; do
  for cfg in "none default" "32768 0" "65536 0" "32768 default"; do
    set -- $cfg
    b=""; [ "$2" = 0 ] && b="--unsent-budget 0"
    t=""; [ "$1" != none ] && t="XTOGGLE=$1"
    env $t python3 /tmp/i44/h2rcell.py "toggle$1-b$2" ./staticd-xturn --root www --port 18095 --bind 127.0.0.1 --threads 2 --log-format off $b -- http://127.0.0.1:18095/1m.bin
  done
  python3 /tmp/i44/h2rcell.py h2o h2o -c h2o.conf -- http://127.0.0.1:18091/1m.bin; pkill -x h2o; sleep 0.3
done
