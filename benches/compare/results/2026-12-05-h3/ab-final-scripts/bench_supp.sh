#!/bin/bash
# Supplementary (not in the brief): NEW 417adaa (/tmp/ab/staticd-new, the previous A/B's NEW) vs FINAL,
# HTTP/3 only, same client commands as bench.sh; 3 rounds, NEW then FINAL per test; 3 s pause.
# usage: bench_supp.sh NEWPID NEWPORT FINALPID FINALPORT
set -u
APID=$1 APORT=$2 BPID=$3 BPORT=$4
CPU=/tmp/ab/final/scripts/cpu.sh
OHA=/opt/oha/bin/oha
for r in 1 2 3; do
  for t in h3_1k h3_1m; do
    for b in new417 final; do
      if [ $b = new417 ]; then pid=$APID; port=$APORT; else pid=$BPID; port=$BPORT; fi
      case $t in
        h3_1k) cmd=($OHA --no-tui -z 10s -c 50 --http-version 3 --insecure --output-format json https://127.0.0.1:$port/1k.bin);;
        h3_1m) cmd=($OHA --no-tui -z 10s -c 50 --http-version 3 --insecure --output-format json https://127.0.0.1:$port/1m.bin);;
      esac
      echo "=== $(date +%T) ${t}_${b}_s$r load $(cut -d' ' -f1-3 /proc/loadavg)"
      $CPU ${t}_${b}_s$r $pid -- "${cmd[@]}"
      sleep 3
    done
  done
done
echo "=== done $(date +%T)"
