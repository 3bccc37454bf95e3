#!/bin/bash
# h2o-speeds.sh DIR ROUNDS: keep-alive 10 KB (wrk -t2 -c50 -d3) against one h2o instance (its
# two threads) and one staticd, alternated; per wrk run, requests/s and the CPU ticks (1/100 s)
# of each server thread that used any. DIR as in ../2026-12-06-h2-raised, with www/10k.bin (10,240 random bytes).
cd "$1"
h2o -c "$PWD/h2o.conf" >/dev/null 2>&1 &
./staticd-h2q --root www --port 18092 --bind 127.0.0.1 --log-format off 2>/dev/null &
sleep 2
ticks() { for t in /proc/$1/task/*; do f=($(cut -d')' -f2 "$t/stat")); echo "$(basename $t) $((f[11]+f[12]))"; done; }
run() { # name pid port
  ticks $2 > /tmp/speeds.a
  r=$(wrk -t2 -c50 -d3 http://127.0.0.1:$3/10k.bin | awk '/Requests\/sec/ {print $2}')
  ticks $2 > /tmp/speeds.b
  echo "$1 $r req/s; thread ticks: $(join /tmp/speeds.a /tmp/speeds.b | awk '$3-$2>5 {printf "%d ", $3-$2}')"
}
H=$(pgrep -xo h2o); S=$(pgrep -x staticd-h2q)
for i in $(seq 1 $2); do run h2o $H 18091; run staticd $S 18092; done
pkill -x h2o; pkill -x staticd-h2q
