#!/usr/bin/env bash
# Start to first response byte of `staticd --inetd` (1 KB, request already
# in the socket, as the harness's inetd_spawn), A/B between builds, against
# spawning /bin/true. Rounds alternate the binaries, so that a noisy machine
# shifts them alike; the median of the rounds' p50s is the figure to quote.
#
#   benches/inetd_start.sh [ROUNDS] [RUNS] [BINARY...]
#   (default: 5 rounds of 200 spawns of target/release/staticd)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
runs=${2:-200}
shift $(($# < 2 ? $# : 2))
target=${CARGO_TARGET_DIR:-target}
if (($# == 0)); then
    set -- "$target/release/staticd"
fi
measure="$target/inetd_start_measure"
if [[ ! -x $measure || benches/inetd_start/measure.rs -nt $measure ]]; then
    rustc --edition 2021 -O -o "$measure" benches/inetd_start/measure.rs
fi
exec "$measure" "$rounds" "$runs" "$@"
