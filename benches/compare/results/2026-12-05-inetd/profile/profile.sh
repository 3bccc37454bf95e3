#!/bin/sh
# Where one start of `staticd --inetd` goes: perf samples of 400 starts,
# by the function they land in, grouped (buckets.py). Run from this
# directory, as root, after `cargo build --release`; needs gcc, perf, python3.
# Usage: ./profile.sh BINARY [ARGS...]   (the binary is given its flags).
set -eu
gcc -O2 -o /tmp/spawn spawn.c
www=$(mktemp -d)
head -c 1000 /dev/urandom > "$www/1000.bin"
printf 'GET /1000.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' > "$www.req"
bin=$1; shift
env -i PATH=/usr/bin:/bin /tmp/spawn 400 "$www.req" "$www" "$bin" --inetd --root "$www" --log-format off "$@"
env -i PATH=/usr/bin:/bin perf record -q -F 20000 -g -o "$www.perf" -- /tmp/spawn 400 "$www.req" "$www" "$bin" --inetd --root "$www" --log-format off "$@" >/dev/null
perf report -i "$www.perf" --comm "$(basename "$bin" | cut -c1-15)" --no-children --sort dso,sym -q -g none -F sample,dso,sym 2>/dev/null | python3 buckets.py
rm -rf "$www" "$www.req" "$www.perf"
