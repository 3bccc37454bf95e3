#!/bin/bash
# usage: bench.sh OLDPID OLDPORT NEWPID NEWPORT
# 3 rounds; within each round, per test: OLD then NEW. Each client run 10 s; 3 s pause between runs.
set -u
OLDPID=$1 OLDPORT=$2 NEWPID=$3 NEWPORT=$4
CPU=/tmp/ab/scripts/cpu.sh
OHA=/opt/oha/bin/oha
for r in 1 2 3; do
  for t in h3_1k h3_1m h2_1k; do
    for b in old new; do
      if [ $b = old ]; then pid=$OLDPID; port=$OLDPORT; else pid=$NEWPID; port=$NEWPORT; fi
      case $t in
        h3_1k) cmd=($OHA --no-tui -z 10s -c 50 --http-version 3 --insecure --output-format json https://127.0.0.1:$port/1k.bin);;
        h3_1m) cmd=($OHA --no-tui -z 10s -c 50 --http-version 3 --insecure --output-format json https://127.0.0.1:$port/1m.bin);;
        h2_1k) cmd=(h2load -c 50 -m 10 -D 10 https://127.0.0.1:$port/1k.bin);;
      esac
      echo "=== $(date +%T) ${t}_${b}_r$r load $(cut -d' ' -f1-3 /proc/loadavg)"
      $CPU ${t}_${b}_r$r $pid -- "${cmd[@]}"
      sleep 3
    done
  done
done
echo "=== done $(date +%T)"
