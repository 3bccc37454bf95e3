#!/usr/bin/env bash
# Turns (writer::TURN) against the commit before them and nginx and lighttpd, in rotating
# order, 3 rounds: wrk -t2, 3 s a cell after a 1 s warm-up, by the cell.py of
# ../2026-12-05-large/unsent-ab/ (server CPU per request from /proc, and the whole machine's).
# Usage: turns-ab.sh DIR, where DIR holds staticd-main and staticd-turns, nginx.conf (as in
# ../2026-12-06-raised, root DIR/www, port 18090), this directory's lighttpd.conf (its
# document-root edited to DIR/www, port 18094), cert.pem and key.pem (any self-signed pair, for
# the https cells), and www/ with 1k.bin, 100k.bin, 1m.bin and 10m.bin. SERVERS (default
# "main turns nginx lighttpd") and CELLS ("CLOSE FILE CLIENTS [https];...") choose others; the
# peers serve only the cleartext cells.
set -eu
cell=$(cd "$(dirname "$0")/../2026-12-05-large/unsent-ab" && pwd)/cell.py
conf=$(cd "$(dirname "$0")" && pwd)/lighttpd.conf
cd "$1"
run() { # run ROUND SERVER FILE CLIENTS SCHEME (CLOSE in the environment)
  case $2 in
    nginx) "$cell" "r$1 nginx" nginx -c "$PWD/nginx.conf" -- "http://127.0.0.1:18090/$3" $4 3 ;;
    lighttpd) "$cell" "r$1 lighttpd" lighttpd -D -f "$conf" -- "http://127.0.0.1:18094/$3" $4 3 ;;
    *)
      local tls=()
      [ "$5" = https ] && tls=(--tls-cert cert.pem --tls-key key.pem)
      "$cell" "r$1 $2" "./staticd-$2" --root www --port 18092 --bind 127.0.0.1 --log-format off "${tls[@]}" -- "$5://127.0.0.1:18092/$3" $4 3 ;;
  esac
}
IFS=';' read -ra cells <<< "${CELLS:-0 1m.bin 50;0 1m.bin 50 https;0 10m.bin 50;1 1m.bin 50;1 10m.bin 50;0 1m.bin 2000;0 100k.bin 50;0 1k.bin 50}"
for cellspec in "${cells[@]}"; do
  set -- $cellspec
  close=$1 file=$2 clients=$3 scheme=${4:-http}
  servers=(${SERVERS:-main turns nginx lighttpd})
  [ "$scheme" = https ] && servers=(main turns)
  echo "# Connection: close=$close, $file, $clients clients, $scheme"
  for round in 1 2 3; do
    # Each round starts one further along the list.
    n=${#servers[@]}
    order=()
    for ((i = 0; i < n; i++)); do order+=("${servers[(i + round - 1) % n]}"); done
    for s in "${order[@]}"; do
      if [ "$close" = 1 ]; then CLOSE=1 run $round $s $file $clients $scheme; else run $round $s $file $clients $scheme; fi
    done
  done
done
