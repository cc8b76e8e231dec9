package rebalance

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/wharfmq/wharf/protocol"
)

// allocate assigns queues to members (both sorted) for one topic. prev is
// the current target owner of each queue: allocation is sticky, so a queue
// moves only when it must (its owner left, or the owner holds more than its
// share). It returns queue -> member.
func allocate(strategy string, queues []protocol.QueueRef, members []string, prev map[protocol.QueueRef]string) map[protocol.QueueRef]string {
	out := make(map[protocol.QueueRef]string, len(queues))
	if len(members) == 0 {
		return out
	}
	if strategy == protocol.AllocateConsistentHash {
		ring := newHashRing(members, 10)
		for _, q := range queues {
			out[q] = ring.owner(fmt.Sprintf("%s@%d", q.Topic, q.QueueID))
		}
		return out
	}
	// Average: every member gets floor(Q/M) queues, the first Q%M members
	// (in sorted order) one more. Keep what each member already owns up to
	// its quota, then hand out the rest.
	quota := map[string]int{}
	for i, m := range members {
		quota[m] = len(queues) / len(members)
		if i < len(queues)%len(members) {
			quota[m]++
		}
	}
	have := map[string]int{}
	var free []protocol.QueueRef
	for _, q := range queues {
		if m, ok := prev[q]; ok {
			if _, live := quota[m]; live && have[m] < quota[m] {
				out[q] = m
				have[m]++
				continue
			}
		}
		free = append(free, q)
	}
	i := 0
	for _, m := range members {
		for have[m] < quota[m] && i < len(free) {
			out[free[i]] = m
			have[m]++
			i++
		}
	}
	return out
}

// hashRing is a consistent-hash ring with virtual nodes (MD5, as RocketMQ's
// AllocateMessageQueueConsistentHash).
type hashRing struct {
	points []uint64
	owners map[uint64]string
}

func newHashRing(members []string, virtual int) *hashRing {
	r := &hashRing{owners: map[uint64]string{}}
	for _, m := range members {
		for v := 0; v < virtual; v++ {
			h := hash64(fmt.Sprintf("%s#%d", m, v))
			r.points = append(r.points, h)
			r.owners[h] = m
		}
	}
	sort.Slice(r.points, func(i, j int) bool { return r.points[i] < r.points[j] })
	return r
}

func (r *hashRing) owner(key string) string {
	h := hash64(key)
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i] >= h })
	if i == len(r.points) {
		i = 0
	}
	return r.owners[r.points[i]]
}

func hash64(s string) uint64 {
	sum := md5.Sum([]byte(s))
	return binary.BigEndian.Uint64(sum[:8])
}
