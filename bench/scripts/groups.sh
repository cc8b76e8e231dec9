#!/bin/bash
# Push-consumer throughput with 1 and 3 members of one group, on a 200,000-message backlog.
set -u
W=${WHARF:-$(pwd)/bin/wharf}
D=$(mktemp -d); rm -rf $D; mkdir -p $D; cd $D
$W broker --storePathRootDir ./b --listenPort 33911 --mappedFileSizeCommitLog 268435456 > b.log 2>&1 &
BP=$!
sleep 1.5
$W topic create --broker 127.0.0.1:33911 --topic gb --queues 8 > /dev/null
$W produce --broker 127.0.0.1:33911 --topic gb --count 200000 --size 1024 --batch 32 --json 2>/dev/null | tail -1
S=$(date +%s.%N)
$W consume --broker 127.0.0.1:33911 --topic gb --group one --from first --count 200000 --idle-exit 5s --json 2>/dev/null | tail -1
E=$(date +%s.%N); python3 -c "print('1 member: %.0f msg/s wall' % (200000/($E-$S)))"
S=$(date +%s.%N)
for i in 1 2 3; do ( $W consume --broker 127.0.0.1:33911 --topic gb --group three --from first --idle-exit 3s --json 2>/dev/null | tail -1 > c$i.json ) & done
wait %2 %3 %4 2>/dev/null; sleep 0.1
while [ $(ls c*.json 2>/dev/null | wc -l) -lt 3 ] || ! grep -q received c3.json; do sleep 0.2; done
E=$(date +%s.%N)
cat c*.json
python3 -c "
import json
r=[json.load(open('c%d.json'%i)) for i in (1,2,3)]
tot=sum(x['received'] for x in r)
print('3 members: received', tot, 'dups', sum(x.get('duplicates',0) for x in r), 'wall %.1fs (incl. 3 s idle exit)' % ($E-$S), 'per-member msgs_per_s', [round(x['msgs_per_s']) for x in r])"
kill $BP; wait 2>/dev/null
