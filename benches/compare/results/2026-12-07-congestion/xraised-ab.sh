#!/bin/bash
cd /tmp/i44/ab
for r in 1 2 3; do
  for x in 4194304 262144 524288 1048576; do
    XRAISED=$x python3 /tmp/i44/h2rcell.py "raised$x" ./staticd-xturn --root www --port 18095 --bind 127.0.0.1 --threads 2 --log-format off -- http://127.0.0.1:18095/1m.bin
  done
  python3 /tmp/i44/h2rcell.py h2o h2o -c h2o.conf -- http://127.0.0.1:18091/1m.bin; pkill -x h2o; sleep 0.3
done
