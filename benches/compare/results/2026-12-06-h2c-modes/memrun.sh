#!/bin/bash
# memrun.sh N: h2c 1MB runs, samples TCP mem pages (sockstat) mid-run
for i in $(seq $1); do
  ./staticd-count --root www --port 18092 --bind 127.0.0.1 --log-format off 2> cnt.err &
  pid=$!
  sleep 0.5
  (sleep 2; for k in 1 2 3 4 5; do awk '/^TCP:/ {printf "%s ", $NF}' /proc/net/sockstat; sleep 0.3; done) > mem.txt &
  r=$(h2load -t2 -c50 -m10 -D 3 --warm-up-time 1 http://127.0.0.1:18092/1m.bin | grep -o '[0-9.]* req/s')
  wait %2 2>/dev/null; sleep 0.3
  kill $pid; wait $pid 2>/dev/null
  echo "$i $r mem pages: $(cat mem.txt)"
done
