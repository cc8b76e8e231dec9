package netio

import (
	"github.com/panjf2000/gnet/v2/pkg/logging"
	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/sim" // want imports: imports github.com/wharfmq/wharf/sim: not in the allowlist of netio/
	"github.com/wharfmq/wharf/storage"
)

var _, _, _, _ = logging.Infof, actors.New, sim.Run, storage.DecodeRecord
