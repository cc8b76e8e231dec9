package sim

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats.go" // want imports: imports github.com/nats-io/nats.go: not in the allowlist of sim/
	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/cmd/wharf" // want imports: imports github.com/wharfmq/wharf/cmd/wharf: nothing outside cmd/ imports cmd/
	"github.com/wharfmq/wharf/netio"
)

// The simulator is outside the seam folders: it may read the clock.
func Run() { go actors.Start(time.Now(), hdrhistogram.New, nats.Connect, wharf.Main, netio.Serve) }
