package brokertest

import (
	"bufio"
	"fmt"
	"net"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// callTimeout bounds one helper call: the broker answers these at once.
const callTimeout = 10 * time.Second

// call sends req to the broker at addr on a connection of its own and
// decodes the answer's fields into into (which may be nil). It is the
// helpers' small client: one request, one answer, no retries, so what a
// helper reports is what the broker said.
func call(addr string, req protocol.Request, into protocol.Fields) (protocol.Status, string, error) {
	lim := protocol.DefaultLimits()
	nc, err := net.DialTimeout("tcp", addr, callTimeout)
	if err != nil {
		return 0, "", fmt.Errorf("brokertest: dial %s: %w", addr, err)
	}
	defer nc.Close()
	if err := nc.SetDeadline(time.Now().Add(callTimeout)); err != nil {
		return 0, "", fmt.Errorf("brokertest: deadline: %w", err)
	}
	const opaque = 1
	frame, err := protocol.AppendRequest(nil, opaque, 0, req)
	if err != nil {
		return 0, "", fmt.Errorf("brokertest: encode %v: %w", req.RequestCode(), err)
	}
	if _, err := nc.Write(frame); err != nil {
		return 0, "", fmt.Errorf("brokertest: send %v: %w", req.RequestCode(), err)
	}
	r := bufio.NewReader(nc)
	for {
		buf, err := readFrame(r, lim)
		if err != nil {
			return 0, "", fmt.Errorf("brokertest: answer to %v: %w", req.RequestCode(), err)
		}
		f, err := protocol.DecodeFrame(buf, lim)
		if err != nil {
			return 0, "", fmt.Errorf("brokertest: answer to %v: %w", req.RequestCode(), err)
		}
		if !f.IsResponse() || f.Opaque != opaque {
			continue // a request the broker pushed
		}
		if err := protocol.DecodeResponse(f, lim, into); err != nil {
			return 0, "", fmt.Errorf("brokertest: answer to %v: %w", req.RequestCode(), err)
		}
		return f.Status, f.Remark, nil
	}
}
