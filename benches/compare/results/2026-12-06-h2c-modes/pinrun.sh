#!/bin/bash
# pinrun.sh MODE N: h2c 1MB with staticd's worker threads pinned: split (0->cpu0,1->cpu1), same (both cpu0, h2load cpu1), none
mode=$1
for i in $(seq $2); do
  ./staticd-count --root www --port 18092 --bind 127.0.0.1 --log-format off 2> cnt.err &
  pid=$!
  sleep 0.5
  H=""
  for t in /proc/$pid/task/*; do
    c=$(cat $t/comm); tid=${t##*/}
    case "$mode:$c" in
      split:staticd-0) taskset -pc 0 $tid >/dev/null;;
      split:staticd-1) taskset -pc 1 $tid >/dev/null;;
      same:staticd-*) taskset -pc 0 $tid >/dev/null;;
    esac
  done
  [ $mode = same ] && H="taskset -c 1"
  r=$($H h2load -t2 -c50 -m10 -D 3 --warm-up-time 1 http://127.0.0.1:18092/1m.bin | grep -o '[0-9.]* req/s')
  kill $pid; wait $pid 2>/dev/null
  echo "$mode $i $r"
done
