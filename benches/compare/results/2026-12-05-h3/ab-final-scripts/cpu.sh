#!/bin/bash
# usage: cpu.sh LABEL PID -- client command...
# Adapted from /work/notes/AB-h3-scripts/cpu.sh (itself from REPORT-scripts): output under /tmp/ab/final/runs,
# /proc/loadavg at the start of the run.
label=$1; pid=$2; shift 3; cmd=("$@")
out=${RUNS:-/tmp/ab/final/runs}/$label
mkdir -p $out
snap() { # per-thread utime stime comm
  for t in /proc/$pid/task/*; do
    read -r line < $t/stat
    comm=$(cat $t/comm)
    rest=${line##*) }
    set -- $rest
    echo "$(basename $t) $comm ${12} ${13}"
  done
}
cat /proc/loadavg > $out/loadavg_start
read -r l < /proc/$pid/stat; r=${l##*) }; set -- $r; b_u=${12}; b_s=${13}
snap > $out/threads_before
nstat -az 2>/dev/null | grep -E 'Udp(InErrors|RcvbufErrors|SndbufErrors|InDatagrams|OutDatagrams)\b' > $out/nstat_before
echo "${cmd[*]}" > $out/command
t0=$(date +%s.%N)
/usr/bin/time -f 'client_user=%U client_sys=%S client_wall=%e client_maxrss_kb=%M' -o $out/client_time "${cmd[@]}" > $out/client_out 2> $out/client_err
t1=$(date +%s.%N)
read -r l < /proc/$pid/stat; r=${l##*) }; set -- $r; a_u=${12}; a_s=${13}
snap > $out/threads_after
nstat -az 2>/dev/null | grep -E 'Udp(InErrors|RcvbufErrors|SndbufErrors|InDatagrams|OutDatagrams)\b' > $out/nstat_after
cat /proc/loadavg > $out/loadavg_end
echo "server_utime_ticks=$((a_u-b_u)) server_stime_ticks=$((a_s-b_s)) wall=$(echo "$t1 - $t0" | bc)" > $out/server_cpu
cat $out/server_cpu $out/client_time
join <(sort $out/threads_before) <(sort $out/threads_after) | awk '{d=($6-$3)+($7-$4); c[$2]+=d; n[$2]++} END{for(k in c) printf "threads %s x%d: %d ticks\n", k, n[k], c[k]}' | tee $out/threads_delta
paste $out/nstat_before $out/nstat_after | awk '{printf "%s before=%s after=%s delta=%d\n",$1,$2,$5,$5-$2}' | tee $out/nstat_delta
