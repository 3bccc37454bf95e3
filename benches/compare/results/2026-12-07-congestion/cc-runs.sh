#!/bin/bash
# The h2c/h2 cells and the large HTTP/1.1 cells under cubic, then under bbr (the machine's default), same stretch.
cd /work/main
R=/tmp/i44/cc
mkdir -p $R
for cc in cubic bbr; do
  sysctl -w net.ipv4.tcp_congestion_control=$cc
  cargo bench --bench compare -- --h2-only --h2-connections 0 --startup-runs 0 --idle-connections 0 --no-h3 --out $R/h2-$cc > $R/h2-$cc.log 2>&1
  cargo bench --bench compare -- --sizes 1M,10M --connections 50 --modes keep-alive,close --no-https --no-h2 --no-h3 --startup-runs 0 --idle-connections 0 --out $R/large-$cc > $R/large-$cc.log 2>&1
done
sysctl -w net.ipv4.tcp_congestion_control=bbr
echo done
