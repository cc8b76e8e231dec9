package protocol

import "fmt"

// CodeControllerRaftMessage is CONTROLLER_RAFT_MESSAGE (controller node ->
// controller node, oneway): one raft message of the controllers' group, on
// the controllers' own listener. Raft retries what is lost, so there is no
// answer.
const CodeControllerRaftMessage Code = 4202

func init() { codeNames[CodeControllerRaftMessage] = "CONTROLLER_RAFT_MESSAGE" }

// ControllerRaftMessageRequest carries a raft message in the frame body, in
// the raft node's own encoding (actors/raftnode.EncodeMessage), which this
// package does not read; the receiver checks that its sender is a peer.
type ControllerRaftMessageRequest struct {
	Data []byte `msgpack:"-"`
}

func (r *ControllerRaftMessageRequest) appendBody(b []byte) ([]byte, error) {
	return append(b, r.Data...), nil
}

func (r *ControllerRaftMessageRequest) decodeBody(body []byte, lim Limits) error {
	if len(body) == 0 {
		return fmt.Errorf("%w: CONTROLLER_RAFT_MESSAGE without a message", ErrFrameIllegal)
	}
	r.Data = body
	return nil
}

func (r *ControllerRaftMessageRequest) RequestCode() Code { return CodeControllerRaftMessage }
func (*ControllerRaftMessageRequest) isFields()           {}
