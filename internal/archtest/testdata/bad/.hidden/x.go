package hidden

import "github.com/wharfmq/wharf/cmd/wharf"

var _ = wharf.Main
