#!/usr/bin/env bash
# Runs the cargo-fuzz targets under libFuzzer, on the stable toolchain.
#
#   fuzz/run.sh MINUTES [TARGET...]
#
# Builds every target once (`cargo fuzz build -O -a`: optimised, with debug
# assertions and overflow checks, AddressSanitizer on; RUSTC_BOOTSTRAP=1 lets
# stable rustc take cargo-fuzz's -Z sanitizer flags), then runs each named
# target (all of `cargo fuzz list` if none is named) for MINUTES minutes:
#
# * working corpus fuzz/work/<target>/ (ignored by git), seeded from the
#   committed fuzz/corpus/<target>/, which is never written;
# * log in fuzz/work/logs/<target>.log;
# * crashes, timeouts, leaks and OOMs in fuzz/artifacts/<target>/.
#
# Environment:
#   JOBS=N          run N targets at once (default 1)
#   SANITIZER=S     cargo fuzz's -s: address (default) or none
#   TIMEOUT=SECS    libFuzzer's per-input -timeout (default 60)
#   RSS_LIMIT_MB=M  libFuzzer's -rss_limit_mb (default 2048)
#
# At the end it prints one line per target (minutes, executions from
# libFuzzer's final stats, exec/s, working corpus files before -> after,
# new findings) and exits non-zero if any target found something. Every run
# is bounded by -max_total_time, and `timeout` kills one that overruns it by
# five minutes, so the script always stops by itself.
# Run it niced when the machine is shared: JOBS=2 nice -n 19 fuzz/run.sh 10
set -euo pipefail

usage() {
    echo "usage: [JOBS=N] [SANITIZER=address|none] $0 MINUTES [TARGET...]" >&2
    exit 2
}
[[ $# -ge 1 && $1 =~ ^[1-9][0-9]*$ ]] || usage
minutes=$1
shift
jobs=${JOBS:-1}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || usage
sanitizer=${SANITIZER:-address}
unit_timeout=${TIMEOUT:-60}
rss_limit=${RSS_LIMIT_MB:-2048}

fuzz_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$fuzz_dir"
export RUSTC_BOOTSTRAP=1

echo "== building (cargo fuzz build -O -a -s $sanitizer)" >&2
cargo fuzz build -O -a -s "$sanitizer"

if [[ $# -gt 0 ]]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi
[[ ${#targets[@]} -gt 0 ]] || { echo "no fuzz targets" >&2; exit 2; }

triple=$(rustc -vV | sed -n 's/^host: //p')
bin_dir=$fuzz_dir/target/$triple/release
for t in "${targets[@]}"; do
    [[ -x $bin_dir/$t ]] || { echo "no fuzz target binary $bin_dir/$t" >&2; exit 2; }
done

if [[ $sanitizer == address ]]; then
    # As `cargo fuzz run` does.
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0
fi

work=$fuzz_dir/work
mkdir -p "$work/logs"

count_files() {
    find "$1" -maxdepth 1 -type f 2>/dev/null | wc -l
}

findings_in() {
    find "$1" -maxdepth 1 -type f \
        \( -name 'crash-*' -o -name 'timeout-*' -o -name 'leak-*' -o -name 'oom-*' \) \
        2>/dev/null | sort
}

# Runs one target; leaves <target>.{rc,secs,before,after,new} in work/logs.
fuzz_one() {
    local t=$1
    local corpus=$work/$t artifacts=$fuzz_dir/artifacts/$t log=$work/logs/$t.log
    mkdir -p "$corpus" "$artifacts"
    if [[ -d $fuzz_dir/corpus/$t ]]; then
        cp -n "$fuzz_dir/corpus/$t"/* "$corpus"/ 2>/dev/null || true
    fi
    findings_in "$artifacts" >"$work/logs/$t.known"
    count_files "$corpus" >"$work/logs/$t.before"
    local start rc=0
    start=$(date +%s)
    timeout --kill-after=30 $((minutes * 60 + 300)) \
        "$bin_dir/$t" "$corpus" \
        -artifact_prefix="$artifacts/" \
        -max_total_time=$((minutes * 60)) \
        -timeout="$unit_timeout" \
        -rss_limit_mb="$rss_limit" \
        -print_final_stats=1 \
        >"$log" 2>&1 || rc=$?
    echo $(($(date +%s) - start)) >"$work/logs/$t.secs"
    echo "$rc" >"$work/logs/$t.rc"
    count_files "$corpus" >"$work/logs/$t.after"
    findings_in "$artifacts" | comm -13 "$work/logs/$t.known" - >"$work/logs/$t.new"
    echo "== $t done (exit $rc)" >&2
}

running=0
for t in "${targets[@]}"; do
    if [[ $running -ge $jobs ]]; then
        wait -n || true
        running=$((running - 1))
    fi
    echo "== $t: $minutes min, log $work/logs/$t.log" >&2
    fuzz_one "$t" &
    running=$((running + 1))
done
wait || true

failed=0
printf '%-15s %7s %12s %8s %15s  %s\n' target minutes executions exec/s corpus findings
for t in "${targets[@]}"; do
    log=$work/logs/$t.log
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    secs=$(cat "$work/logs/$t.secs")
    rc=$(cat "$work/logs/$t.rc")
    new=$(wc -l <"$work/logs/$t.new")
    if [[ $rc -ne 0 || $new -gt 0 ]]; then
        failed=1
        found="$new (exit $rc): $(tr '\n' ' ' <"$work/logs/$t.new")"
    else
        found=0
    fi
    printf '%-15s %7s %12s %8s %15s  %s\n' "$t" \
        "$(awk -v s="$secs" 'BEGIN { printf "%.1f", s / 60 }')" \
        "${execs:-?}" "${rate:-?}" \
        "$(cat "$work/logs/$t.before") -> $(cat "$work/logs/$t.after")" \
        "$found"
done
exit "$failed"
