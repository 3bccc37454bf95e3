#!/bin/bash
# usage: setup.sh RATE_BPS   (e.g. 100000000 or 1000000000); 25 ms each way, limit 10000 pkts
# This kernel has no sch_netem (CONFIG_NET_SCH_NETEM not set), so pathemu (userspace, TUN)
# does netem's delay+rate+limit: tnm-s (in ns srv, 10.99.0.1/24) <-> pathemu <-> tnm-c (ns cli, 10.99.0.2/24).
set -e
RATE=${1:-100000000}
ip netns add srv
ip netns add cli
/tmp/netem/pathemu/target/release/pathemu tnm-s tnm-c $RATE 25 10000 </dev/null >/dev/null 2>/tmp/netem/pathemu.log &
echo $! > /tmp/netem/pathemu.pid
sleep 0.5
ip link set tnm-s netns srv
ip link set tnm-c netns cli
ip -n srv addr add 10.99.0.1/24 dev tnm-s
ip -n cli addr add 10.99.0.2/24 dev tnm-c
ip -n srv link set tnm-s up
ip -n cli link set tnm-c up
ip -n srv link show tnm-s; ip -n cli link show tnm-c
