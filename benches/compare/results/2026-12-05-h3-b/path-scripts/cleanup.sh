#!/bin/bash
# stop what this job started (by pid file), then remove the namespaces
for f in /tmp/netem/staticd.pid /tmp/netem/pathemu.pid; do
  if [ -f $f ]; then kill "$(cat $f)" 2>/dev/null; sleep 1; kill -9 "$(cat $f)" 2>/dev/null; rm -f $f; fi
done
ip netns del srv 2>/dev/null
ip netns del cli 2>/dev/null
ip netns list; ip link show | grep -E 'tnm-|veth' || echo "no tnm/veth links left"
