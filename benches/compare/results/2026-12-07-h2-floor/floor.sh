#!/bin/bash
# floor.sh STATICD: h2c 1 KB, staticd beside h2o (3 alternated rounds of h2rcell.py), the
# header bytes per response (h2load's traffic line), and where each server's CPU goes
# (perf record -g, 4 s under h2load -t2 -c50 -m10), split into kernel, nghttp2 and the rest.
# Run it in a directory holding www/1k.bin (1,024 bytes) and h2o.conf (../2026-12-06-h2-raised/h2o.conf);
# WORK names it (default /tmp/i44/ab, where this record was made). Writes its files beside itself.
here=$(cd "$(dirname "$0")" && pwd)
cd "${WORK:-/tmp/i44/ab}"
S=$1; out=$here
for r in 1 2 3; do
  python3 "$here/../2026-12-06-h2-raised/h2rcell.py" staticd $S --root www --port 18095 --bind 127.0.0.1 --threads 2 --log-format off -- http://127.0.0.1:18095/1k.bin
  python3 "$here/../2026-12-06-h2-raised/h2rcell.py" h2o h2o -c h2o.conf -- http://127.0.0.1:18091/1k.bin; pkill -x h2o; sleep 0.5
done | tee $out/cells.txt
setsid $S --root www --port 18095 --bind 127.0.0.1 --threads 2 --log-format off >/dev/null 2>&1 &
setsid h2o -c h2o.conf >/dev/null 2>&1 &
sleep 1
for u in staticd:18095 h2o:18091; do
  echo "== ${u%%:*}"; h2load -t2 -c50 -m10 -n 200000 http://127.0.0.1:${u##*:}/1k.bin | grep -E '^traffic'
done | tee $out/headers.txt
for n in staticd h2o; do
  if [ $n = staticd ]; then pids=$(pgrep -f "^$S --root www --port 18095"); port=18095; else pids=$(pgrep -x h2o | paste -sd,); port=18091; fi
  h2load -t2 -c50 -m10 -D7 http://127.0.0.1:$port/1k.bin >/dev/null &
  c=$!; sleep 1.5
  perf record -F 2000 -g -p $pids -o $out/perf-$n.data -- sleep 4 2>/dev/null
  wait $c
  perf report -i $out/perf-$n.data --no-children --sort dso -g none 2>/dev/null | grep -E '^ +[0-9]' > $out/$n-dso.txt
  perf report -i $out/perf-$n.data --no-children --sort sym -g none 2>/dev/null | grep -E '^ +[0-9]' | head -60 > $out/$n-sym.txt
  perf report -i $out/perf-$n.data --no-children --sort sym -g none 2>/dev/null | grep -E '^ +[0-9]' | awk -v n=$n '{p=$1; sub("%","",p); if ($0 ~ /nghttp2_/) g+=p; else if ($0 ~ /\[k\]/) k+=p; else u+=p} END {printf "%-8s kernel %5.1f%%  nghttp2 %5.1f%%  other user space %5.1f%%\n", n, k, g, u}'
done | tee $out/split.txt
pkill -x h2o; pkill -f "^$S --root www"
