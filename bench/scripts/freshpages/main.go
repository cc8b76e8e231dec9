// Command freshpages measures how fast this machine hands a process memory
// it has not used recently: it touches GiB of new anonymous memory page by
// page and prints the time. On a VM whose memory the host backs lazily (or
// takes back when the guest frees it) this is far slower than memory
// bandwidth, and it bounds how fast any process can fill new page-cache
// pages (see docs/BENCHMARKS.md, "Targets"). Run it twice in a row: the
// second run shows the cost once the host backs the pages.
//
//	cd bench && go run ./scripts/freshpages --gib 18
package main

import (
	"flag"
	"fmt"
	"time"
)

func main() {
	gib := flag.Int("gib", 8, "GiB to touch (keep it below the free memory)")
	flag.Parse()
	start := time.Now()
	keep := make([][]byte, 0, *gib*4)
	for range *gib * 4 {
		b := make([]byte, 256<<20)
		for p := 0; p < len(b); p += 4096 {
			b[p] = 1
		}
		keep = append(keep, b)
	}
	el := time.Since(start)
	fmt.Printf("touched %d GiB of new memory in %v: %.2f GiB/s\n", len(keep)/4, el.Round(time.Millisecond), float64(len(keep))/4/el.Seconds())
}
