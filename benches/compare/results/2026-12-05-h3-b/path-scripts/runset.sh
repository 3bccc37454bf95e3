#!/bin/bash
# runset.sh LABEL — all single-connection measurements on the current path (staticd already running)
L=$1; R=/tmp/netem/rec.sh; U=https://10.99.0.1:8443
echo -e "\n## $L\n" >> /tmp/netem/record.md
$R "uptime"
$R "ip netns exec cli python3 /tmp/netem/rtt.py 10.99.0.1 5"
for f in 10m 50m; do
  # HTTP/3, oha (quinn 0.11 defaults: stream window 1.25 MB): 3 requests on one connection
  $R "ip netns exec cli /opt/oha/bin/oha --no-tui --output-format json --http-version 3 --insecure -n 3 -c 1 $U/$f.bin | python3 /tmp/netem/ohasum.py"
  # HTTP/3, aioquic (windows start at 1 MiB and double as used): one connection per run
  for i in 1 2 3; do $R "ip netns exec cli python3 /tmp/netem/aioq_get.py $U/$f.bin"; done
  # HTTPS/TCP (HTTP/1.1), curl: one connection per run
  for i in 1 2 3; do $R "ip netns exec cli curl -sk -o /dev/null -w 'speed_download=%{speed_download}B/s ttfb=%{time_starttransfer}s connect=%{time_connect}s tls=%{time_appconnect}s total=%{time_total}s\n' $U/$f.bin"; done
  # HTTPS/TCP, oha HTTP/1.1: 3 requests on one connection
  $R "ip netns exec cli /opt/oha/bin/oha --no-tui --output-format json --insecure -n 3 -c 1 $U/$f.bin | python3 /tmp/netem/ohasum.py"
done
