#!/bin/bash
# profrun.sh N: h2c 1MB runs with a system-wide perf record of 2 s each; perf-mode-$i.data
for i in $(seq $1); do
  ./staticd-count --root www --port 18092 --bind 127.0.0.1 --log-format off 2> cnt.err &
  pid=$!
  sleep 0.5
  (sleep 1.5; perf record -a -o perf-mode-$i.data -- sleep 2 >/dev/null 2>&1) &
  r=$(h2load -t2 -c50 -m10 -D 3 --warm-up-time 1 http://127.0.0.1:18092/1m.bin | grep -o 'finished in [0-9.]*s, [0-9.]* req/s')
  wait %2 2>/dev/null; sleep 0.3
  kill $pid; wait $pid 2>/dev/null
  echo "$i $r"
done
