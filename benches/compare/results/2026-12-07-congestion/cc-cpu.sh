#!/bin/bash
# h2c 1 MB (h2load -t2 -c50 -m10, 4 s), h2o and staticd (e029713) side by side under each congestion
# control: CPU per request of the server, the client (h2load) and the machine (clientcpu.py); then,
# under each, the pacing timers that fired (perf: timer:hrtimer_expire_entry by function) per request.
cd /tmp/i44/ab
for cc in cubic bbr; do
  sysctl -qw net.ipv4.tcp_congestion_control=$cc
  echo "== net.ipv4.tcp_congestion_control=$cc"
  setsid h2o -c h2o.conf >/dev/null 2>&1 &
  setsid ./staticd-e029 --root www --port 18092 --bind 127.0.0.1 --threads 2 --log-format off >/dev/null 2>&1 &
  sleep 1
  python3 /tmp/i44/clientcpu.py h2o=http://127.0.0.1:18091/1m.bin staticd-e029=http://127.0.0.1:18092/1m.bin h2o=http://127.0.0.1:18091/1m.bin staticd-e029=http://127.0.0.1:18092/1m.bin
  for u in 18091 18092; do
    h2load -t2 -c50 -m10 -D4 http://127.0.0.1:$u/1m.bin > /tmp/i44/hl.txt & hl=$!
    sleep 1.5
    perf record -q -a -e timer:hrtimer_expire_entry -o /tmp/i44/hrt.data -- sleep 2 2>/dev/null
    wait $hl
    n=$(perf script -i /tmp/i44/hrt.data 2>/dev/null | grep -c "function=tcp_pace_kick")
    rps=$(grep -o 'finished in [0-9.]*s, [0-9.]* req/s' /tmp/i44/hl.txt | awk '{print $4}')
    echo "port $u: $rps req/s over the run; tcp_pace_kick timers in 2 s: $n ($(python3 -c "print(round($n/(2*$rps),2))") per request)"
  done
  pkill -x h2o; pkill -x staticd-e029; sleep 1
done
sysctl -qw net.ipv4.tcp_congestion_control=bbr
