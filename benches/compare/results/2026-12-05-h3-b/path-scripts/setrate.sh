#!/bin/bash
set -e
RATE=$1
ip netns exec srv tc qdisc change dev veth-s root netem delay 25ms rate $RATE limit 10000
ip netns exec cli tc qdisc change dev veth-c root netem delay 25ms rate $RATE limit 10000
ip netns exec srv tc qdisc show dev veth-s
ip netns exec cli tc qdisc show dev veth-c
