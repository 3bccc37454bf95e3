#!/bin/bash
# usage: mem.sh BIN LABEL KIND(quic|tls) PORT N
# Fresh server; warm-up of 20 connections of KIND opened and closed; then VmRSS before,
# N idle connections of KIND opened and held, VmRSS after (3 s after the last one opened).
set -u
BIN=$1 LABEL=$2 KIND=$3 PORT=$4 N=$5
cd /tmp/ab; out=/tmp/ab/final/mem/$LABEL; mkdir -p $out; rm -f $out/ready* $out/stop*
setsid $BIN --root /tmp/ab/www --bind 127.0.0.1 --port $PORT --tls-cert cert.pem --tls-key key.pem --log-format off \
  --keepalive-timeout 120 --read-timeout 120 > $out/server.log 2>&1 &
spid=$!; sleep 1.5
rss() { grep -E 'VmRSS|RssAnon' /proc/$spid/status | awk '{printf "%s%s ", $1, $2}'; echo; }
script=/tmp/ab/final/scripts/idle_$KIND.py
python3 $script 127.0.0.1 $PORT 20 $out/ready0 $out/stop0 > $out/warm.log 2>&1 &
w=$!; while [ ! -e $out/ready0 ]; do sleep 0.2; done; touch $out/stop0; wait $w; sleep 2
echo "before: $(rss)" | tee $out/rss
python3 $script 127.0.0.1 $PORT $N $out/ready $out/stop > $out/client.log 2>&1 &
c=$!; while [ ! -e $out/ready ]; do sleep 0.2; done; sleep 3
echo "after $N: $(rss)" | tee -a $out/rss
echo "tcp established on server port: $(ss -tnH state established "( sport = :$PORT )" | wc -l)" | tee -a $out/rss
touch $out/stop; wait $c; cat $out/client.log
sleep 1; echo "after close: $(rss)" | tee -a $out/rss
kill $spid; wait $spid 2>/dev/null
python3 - $out/rss $N <<'PY'
import re, sys
l = open(sys.argv[1]).read().splitlines(); n = int(sys.argv[2])
b = dict(re.findall(r'(\w+):(\d+)', l[0])); a = dict(re.findall(r'(\w+):(\d+)', l[1]))
print(f"VmRSS {b['VmRSS']} -> {a['VmRSS']} kB: {(int(a['VmRSS'])-int(b['VmRSS']))/n:.1f} KiB/conn; RssAnon {b['RssAnon']} -> {a['RssAnon']} kB: {(int(a['RssAnon'])-int(b['RssAnon']))/n:.1f} KiB/conn")
PY
