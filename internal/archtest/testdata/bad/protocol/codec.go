package protocol

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/wharfmq/wharf/protocol/remoting"
	"github.com/wharfmq/wharf/storage" // want imports: imports github.com/wharfmq/wharf/storage: not in the allowlist of protocol/
)

var _ = fmt.Sprint(msgpack.Marshal, remoting.Codec, storage.Open)
