#!/usr/bin/env bash
# The raised unsent queue (422499c) against the commit before it (51cce41) and nginx, in
# rotating order, 3 rounds: wrk -t2 -c50, 3 s a cell, after a 1 s warm-up, by the cell.py of
# ../2026-12-05-large/unsent-ab/ (server CPU per request from /proc, and the whole machine's).
# Usage: raised-ab.sh DIR, where DIR holds staticd-before, staticd-raised, nginx.conf (that
# directory's, root DIR/www) and www/ with 1k.bin, 100k.bin, 1m.bin, 10m.bin. SERVERS
# (default "before raised nginx": staticd-NAME, or nginx) and CELLS ("CLOSE FILE;...")
# choose others.
set -eu
cell=$(cd "$(dirname "$0")/../2026-12-05-large/unsent-ab" && pwd)/cell.py
cd "$1"
run() { # run ROUND SERVER FILE (CLOSE in the environment)
  case $2 in
    nginx) "$cell" "r$1 nginx" nginx -c "$PWD/nginx.conf" -- "http://127.0.0.1:18090/$3" 50 3 ;;
    *) "$cell" "r$1 $2" "./staticd-$2" --root www --port 18092 --bind 127.0.0.1 --log-format off -- "http://127.0.0.1:18092/$3" 50 3 ;;
  esac
}
servers=(${SERVERS:-before raised nginx})
IFS=';' read -ra cells <<< "${CELLS:-1 1m.bin;1 10m.bin;0 10m.bin;0 1m.bin;0 100k.bin;0 1k.bin}"
for cellspec in "${cells[@]}"; do
  set -- $cellspec
  close=$1 file=$2
  echo "# Connection: close=$close, $file"
  for round in 1 2 3; do
    # Each round starts one further along the list.
    n=${#servers[@]}
    order=()
    for ((i = 0; i < n; i++)); do order+=("${servers[(i + round - 1) % n]}"); done
    for s in "${order[@]}"; do
      if [ "$close" = 1 ]; then CLOSE=1 run $round $s $file; else run $round $s $file; fi
    done
  done
done
