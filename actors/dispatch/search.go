package dispatch

// SearchOffset is SEARCH_OFFSET_BY_TIMESTAMP over one queue's offsets
// [lo, hi): the first offset whose message was stored at or after ts
// (RocketMQ 5's lower boundary), hi if none was. storeTime reads the
// store time of one offset's message; an offset it cannot read counts as
// stored before ts. Store times grow with offsets (one writer stamps the
// appends in order), so a binary search reads O(log(hi-lo)) records.
func SearchOffset(lo, hi, ts int64, storeTime func(off int64) (int64, bool)) int64 {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if at, ok := storeTime(mid); ok && at >= ts {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
