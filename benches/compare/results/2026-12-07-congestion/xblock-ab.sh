#!/bin/bash
# h2c 1 MB, staticd with gather blocks of XBLOCK bytes (cleartext), h2o beside; rounds in rotating order.
cd /tmp/i44/ab
for r in 1 2 3 4 5; do
  for b in 327680 81920 163840; do
    XBLOCK=$b python3 /tmp/i44/h2rcell.py "blk$b" ./staticd-xblock --root www --port 18095 --bind 127.0.0.1 --threads 2 --log-format off -- http://127.0.0.1:18095/1m.bin
  done
  python3 /tmp/i44/h2rcell.py h2o h2o -c h2o.conf -- http://127.0.0.1:18091/1m.bin; pkill -x h2o; sleep 0.3
done
