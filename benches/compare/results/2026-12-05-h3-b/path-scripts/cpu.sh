#!/bin/bash
# cpu.sh CMD... — runs CMD, prints CPU seconds used meanwhile by staticd and pathemu (utime+stime from /proc/PID/stat)
S=$(cat /tmp/netem/staticd.pid); E=$(cat /tmp/netem/pathemu.pid); HZ=$(getconf CLK_TCK)
t() { awk '{print $14+$15}' /proc/$1/stat; }
s0=$(t $S); e0=$(t $E); w0=$(date +%s.%N)
"$@"
s1=$(t $S); e1=$(t $E); w1=$(date +%s.%N)
python3 -c "w=$w1-$w0; print(f'wall {w:.2f}s; staticd cpu {($s1-$s0)/$HZ:.2f}s ({($s1-$s0)/$HZ/w*100:.0f}% of a core); pathemu cpu {($e1-$e0)/$HZ:.2f}s ({($e1-$e0)/$HZ/w*100:.0f}%)')"
