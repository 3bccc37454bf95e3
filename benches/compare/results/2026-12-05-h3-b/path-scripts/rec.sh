#!/bin/bash
# rec.sh "command"  — runs it, appends command + raw output to record.md, prints output
{ echo; echo '```'; echo "\$ $1"; } >> /tmp/netem/record.md
out=$(bash -c "$1" 2>&1); rc=$?
echo "$out" | tee -a /tmp/netem/record.md
[ $rc -ne 0 ] && echo "(exit $rc)" | tee -a /tmp/netem/record.md
echo '```' >> /tmp/netem/record.md
exit 0
