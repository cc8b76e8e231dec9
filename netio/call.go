package netio

import "github.com/wharfmq/wharf/protocol"

// Call sends a request that wants an answer (a broker's registration with
// a name server): the answer comes back to the link's Handler with the
// same opaque. Send is oneway. The request is encoded as Wharf's frames
// whatever the link's codec: name servers speak Wharf only.
func (c *outConn) Call(opaque uint32, req protocol.Request) {
	frame, err := protocol.AppendRequest(nil, opaque, 0, req)
	if err != nil {
		c.opt.Logger.Error("encode request", "component", "netio", "code", req.RequestCode(), "err", err)
		return
	}
	c.write(frame)
}
