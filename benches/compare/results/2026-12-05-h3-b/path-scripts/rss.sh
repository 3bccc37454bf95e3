#!/bin/bash
# rss.sh PID SECONDS — samples VmRSS every 0.2 s
pid=$1; end=$((SECONDS+$2))
while [ $SECONDS -lt $end ]; do echo "$(date +%T.%N | cut -c1-12) $(grep VmRSS /proc/$pid/status | awk '{print $2" kB"}')"; sleep 0.2; done
