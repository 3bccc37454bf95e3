#!/bin/bash
# h2raise-ab.sh DIR ROUNDS: h2c and h2 (TLS) 1 MB, main (8939c00) against h2q (raised queues
# for HTTP/2), h2q with --unsent-budget 0, and h2o; rounds in rotating order.
cd "$1"; FILE=${FILE:-1m.bin}
S="--root www --port 18092 --bind 127.0.0.1 --log-format off"
T="--tls-cert cert.pem --tls-key key.pem"
cell() { # name scheme file cmd...
  local n=$1 sch=$2 f=$3; shift 3
  local port=18092; [ "$n" = h2o ] && { [ $sch = http ] && port=18091 || port=18093; }
  /tmp/i44/h2rcell.py "$n" "$@" -- $sch://127.0.0.1:$port/$f
}
for r in $(seq 1 $2); do
  for sch in ${SCHEMES:-http https}; do
    tls=""; [ $sch = https ] && tls="$T"
    order=(${VARIANTS:-main h2q h2q0 h2o})
    k=$(( (r-1) % ${#order[@]} )); order=("${order[@]:$k}" "${order[@]:0:$k}")
    for v in "${order[@]}"; do
      case $v in
        main) cell "r$r $sch main" $sch $FILE ./staticd-main8939 $S $tls ;;
        h2q) cell "r$r $sch h2q" $sch $FILE ./staticd-h2q $S $tls ;;
        h2q0) cell "r$r $sch h2q0" $sch $FILE ./staticd-h2q $S $tls --unsent-budget 0 ;;
        h2o) cell "r$r $sch h2o" $sch 1m.bin h2o -c "$PWD/h2o.conf"; pkill -x h2o; sleep 0.5 ;;
      esac
    done
  done
done
