#!/bin/bash
# usage: bench.sh OLDPID OLDPORT FINALPID FINALPORT
# Same as /work/notes/AB-h3-scripts/bench.sh (3 rounds; within each round, per test: OLD then FINAL;
# each client run 10 s; 3 s pause between runs), plus, at the end of each round, one
# HTTPS-over-TCP 1 MiB wrk run against FINAL only.
set -u
OLDPID=$1 OLDPORT=$2 NEWPID=$3 NEWPORT=$4
CPU=/tmp/ab/final/scripts/cpu.sh
OHA=/opt/oha/bin/oha
for r in 1 2 3; do
  for t in h3_1k h3_1m h2_1k https_1m; do
    for b in old final; do
      if [ $b = old ]; then pid=$OLDPID; port=$OLDPORT; else pid=$NEWPID; port=$NEWPORT; fi
      case $t in
        h3_1k) cmd=($OHA --no-tui -z 10s -c 50 --http-version 3 --insecure --output-format json https://127.0.0.1:$port/1k.bin);;
        h3_1m) cmd=($OHA --no-tui -z 10s -c 50 --http-version 3 --insecure --output-format json https://127.0.0.1:$port/1m.bin);;
        h2_1k) cmd=(h2load -c 50 -m 10 -D 10 https://127.0.0.1:$port/1k.bin);;
        https_1m) [ $b = old ] && continue
                  cmd=(wrk -t 2 -c 50 -d 10s https://127.0.0.1:$port/1m.bin);;
      esac
      echo "=== $(date +%T) ${t}_${b}_r$r load $(cut -d' ' -f1-3 /proc/loadavg)"
      $CPU ${t}_${b}_r$r $pid -- "${cmd[@]}"
      sleep 3
    done
  done
done
echo "=== done $(date +%T)"
