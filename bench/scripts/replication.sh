#!/bin/bash
# Measures: empty-slave catch-up speed, and replication lag under steady load.
set -u
W=${WHARF:-$(pwd)/bin/wharf}
D=$(mktemp -d); rm -rf $D; mkdir -p $D; cd $D
$W broker --storePathRootDir ./m --listenPort 31911 --brokerRole ASYNC_MASTER --mappedFileSizeCommitLog 268435456 > m.log 2>&1 &
MP=$!
sleep 1.5
$W produce --broker 127.0.0.1:31911 --topic cu --count 400000 --size 1024 --batch 32 --json 2>/dev/null | tail -1
MAX=$($W broker status --broker 127.0.0.1:31911 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["max_offset"])')
echo "master log bytes: $MAX"
T0=$(date +%s.%N)
$W broker --storePathRootDir ./s --listenPort 32911 --brokerRole SLAVE --brokerId 1 --haMasterAddress 127.0.0.1:31912 --mappedFileSizeCommitLog 268435456 > s.log 2>&1 &
SP=$!
while true; do
  SM=$($W broker status --broker 127.0.0.1:32911 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["max_offset"])' 2>/dev/null || echo 0)
  if [ "$SM" = "$MAX" ]; then break; fi
  sleep 0.05
done
T1=$(date +%s.%N)
python3 -c "d=$T1-$T0; print('catch-up: %d bytes in %.2f s = %.0f MB/s (includes slave start-up)' % ($MAX, d, $MAX/d/1e6))"
# lag under steady load: produce at a fixed pace, sample the master's view of the slave lag
( $W produce --broker 127.0.0.1:31911 --topic cu --count 200000 --size 1024 --inflight 64 --json > p2.json 2>/dev/null ) &
PP=$!
for i in $(seq 1 20); do
  $W broker status --broker 127.0.0.1:31911 --json 2>/dev/null | python3 -c 'import json,sys; s=json.load(sys.stdin)["slaves"]; print(s[0]["lag_bytes"] if s else -1)'
  sleep 0.2
done > lag.txt
wait $PP
tail -1 p2.json
python3 -c "
v=sorted(int(x) for x in open('lag.txt') if int(x)>=0); print('lag samples (bytes):', 'p50', v[len(v)//2], 'max', v[-1], 'n', len(v))"
kill $MP $SP; wait 2>/dev/null
