package client

import (
	"net"

	"github.com/wharfmq/wharf/client/internal/route"
	"github.com/wharfmq/wharf/rebalance"
	"github.com/wharfmq/wharf/storage" // want imports: imports github.com/wharfmq/wharf/storage: not in the allowlist of client/
)

var _, _, _, _ = net.Dial, route.New, rebalance.Member{}, storage.Open
