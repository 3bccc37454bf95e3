#!/bin/bash
# runs staticd-count + h2load h2c 1MB, prints req/s and read/sent ratio
for i in $(seq $1); do
  ./staticd-count --root www --port 18092 --bind 127.0.0.1 --log-format off 2> cnt.err &
  pid=$!
  sleep 0.5
  r=$(h2load -t2 -c50 -m10 -D 3 --warm-up-time 1 http://127.0.0.1:18092/1m.bin | grep -o 'finished in [0-9.]*s, [0-9.]* req/s')
  sleep 0.3
  kill $pid; wait $pid 2>/dev/null
  awk -v r="$r" '/gather/ {rd+=$3; s+=$5; f+=$7} END {printf "%s read %.0f MB sent %.0f MB ratio %.2f fills %d avgfill %.0f KB\n", r, rd/1e6, s/1e6, rd/s, f, rd/f/1024}' cnt.err
done
