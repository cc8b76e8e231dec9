package protocol

import (
	"fmt"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"
)

// Controller requests (docs/PROTOCOL.md, "Controller"). The controller
// group holds, per broker group, the master, the master epoch and the
// SyncStateSet; brokers register with it, heartbeat it and change their
// SyncStateSet through it. The codes are RocketMQ's where RocketMQ has the
// request; the heartbeat is Wharf's own (RocketMQ reuses 904, which Wharf's
// name server answers).
const (
	// CONTROLLER_ALTER_SYNC_STATE_SET: the master shrinks or expands its
	// SyncStateSet, fenced by its master epoch and set epoch.
	CodeControllerAlterSyncStateSet Code = 1001
	// CONTROLLER_ELECT_MASTER: ask for an election in a group whose master
	// is dead (or has none yet), optionally of a given broker.
	CodeControllerElectMaster Code = 1002
	// CONTROLLER_REGISTER_BROKER: a broker joins and gets its brokerId.
	CodeControllerRegisterBroker Code = 1003
	// CONTROLLER_GET_REPLICA_INFO: a group's master, epochs and set (a
	// linearizable read).
	CodeControllerGetReplicaInfo Code = 1004
	// CONTROLLER_GET_METADATA_INFO: which controller node leads, and the
	// groups as this node holds them (answered by any node).
	CodeControllerGetMetadataInfo Code = 1005
	// NOTIFY_BROKER_ROLE_CHANGED: controller to brokers and name servers,
	// one-way: a group's master or SyncStateSet changed.
	CodeNotifyBrokerRoleChanged Code = 1008
	// CONTROLLER_BROKER_HEARTBEAT: a broker's liveness and progress, sent to
	// the controller leader every second.
	CodeControllerBrokerHeartbeat Code = 4201
)

// Controller statuses (RocketMQ's ResponseCode values).
const (
	// CONTROLLER_FENCED_MASTER_EPOCH: the request's masterEpoch is not the
	// current one: the sender is not (or no longer) the master it thinks.
	StatusControllerFencedMasterEpoch Status = 2000
	// CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: the request's
	// syncStateSetEpoch is not the current one (another change won).
	StatusControllerFencedSyncStateSetEpoch Status = 2001
	// CONTROLLER_INVALID_MASTER: the sender is not the group's master.
	StatusControllerInvalidMaster Status = 2002
	// CONTROLLER_INVALID_REPLICAS: the proposed set lacks the master or
	// names a broker that is not registered in the group.
	StatusControllerInvalidReplicas Status = 2003
	// CONTROLLER_INVALID_REQUEST: a request (or log entry) the controller
	// cannot take.
	StatusControllerInvalidRequest Status = 2005
	// CONTROLLER_BROKER_NOT_ALIVE: the broker named has no fresh heartbeat.
	StatusControllerBrokerNotAlive Status = 2006
	// CONTROLLER_NOT_LEADER: this node does not lead the controller group;
	// the remark is the leader's address ("" if unknown).
	StatusControllerNotLeader Status = 2007
	// CONTROLLER_BROKER_METADATA_NOT_EXIST: no such group or broker.
	StatusControllerBrokerMetadataNotExist Status = 2008
	// CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: a heartbeat from a brokerId
	// the controller does not hold at that address: register first.
	StatusControllerBrokerNeedToBeRegistered Status = 2010
	// CONTROLLER_MASTER_STILL_EXIST: an election asked for while the master
	// is alive.
	StatusControllerMasterStillExist Status = 2011
	// CONTROLLER_ELECT_MASTER_FAILED: no eligible candidate is alive.
	StatusControllerElectMasterFailed Status = 2012
)

func init() {
	codeNames[CodeControllerAlterSyncStateSet] = "CONTROLLER_ALTER_SYNC_STATE_SET"
	codeNames[CodeControllerElectMaster] = "CONTROLLER_ELECT_MASTER"
	codeNames[CodeControllerRegisterBroker] = "CONTROLLER_REGISTER_BROKER"
	codeNames[CodeControllerGetReplicaInfo] = "CONTROLLER_GET_REPLICA_INFO"
	codeNames[CodeControllerGetMetadataInfo] = "CONTROLLER_GET_METADATA_INFO"
	codeNames[CodeNotifyBrokerRoleChanged] = "NOTIFY_BROKER_ROLE_CHANGED"
	codeNames[CodeControllerBrokerHeartbeat] = "CONTROLLER_BROKER_HEARTBEAT"

	statusNames[StatusControllerFencedMasterEpoch] = "CONTROLLER_FENCED_MASTER_EPOCH"
	statusNames[StatusControllerFencedSyncStateSetEpoch] = "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH"
	statusNames[StatusControllerInvalidMaster] = "CONTROLLER_INVALID_MASTER"
	statusNames[StatusControllerInvalidReplicas] = "CONTROLLER_INVALID_REPLICAS"
	statusNames[StatusControllerInvalidRequest] = "CONTROLLER_INVALID_REQUEST"
	statusNames[StatusControllerBrokerNotAlive] = "CONTROLLER_BROKER_NOT_ALIVE"
	statusNames[StatusControllerNotLeader] = "CONTROLLER_NOT_LEADER"
	statusNames[StatusControllerBrokerMetadataNotExist] = "CONTROLLER_BROKER_METADATA_NOT_EXIST"
	statusNames[StatusControllerBrokerNeedToBeRegistered] = "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED"
	statusNames[StatusControllerMasterStillExist] = "CONTROLLER_MASTER_STILL_EXIST"
	statusNames[StatusControllerElectMasterFailed] = "CONTROLLER_ELECT_MASTER_FAILED"
}

// NoBroker is the brokerId meaning "none" in controller messages: the
// controller assigns ids from 1, so 0 (the classic master's id) never names
// a broker in controller mode.
const NoBroker int64 = 0

// MaxSyncStateSet bounds a SyncStateSet (and a group's replicas) on the wire.
const MaxSyncStateSet = 64

// GroupRef names a broker group.
type GroupRef struct {
	ClusterName string `msgpack:"clusterName"`
	BrokerName  string `msgpack:"brokerName"`
}

func (g GroupRef) check() error {
	if g.ClusterName == "" || g.BrokerName == "" {
		return fmt.Errorf("%w: clusterName and brokerName are required", ErrInvalidParameter)
	}
	return nil
}

// ControllerRegisterBrokerRequest registers a broker with the controller.
// Identity is stable per broker: a value the broker generates once and
// keeps in its store directory, so that a broker keeps its brokerId across
// restarts and address changes, and a broker whose store was wiped (its data
// lost) is a new replica with a new id.
type ControllerRegisterBrokerRequest struct {
	GroupRef     `msgpack:",inline"`
	Identity     string `msgpack:"identity"`
	BrokerAddr   string `msgpack:"brokerAddr"`             // host:listenPort
	HAServerAddr string `msgpack:"haServerAddr,omitempty"` // host:haListenPort
}

// Check reports a missing field (ErrInvalidParameter).
func (r *ControllerRegisterBrokerRequest) Check() error {
	if r.Identity == "" || r.BrokerAddr == "" {
		return fmt.Errorf("%w: identity and brokerAddr are required", ErrInvalidParameter)
	}
	return r.GroupRef.check()
}

// ControllerHeartbeatRequest is a broker's liveness and progress. The
// controller leader keeps it in memory only (it is not replicated).
type ControllerHeartbeatRequest struct {
	GroupRef   `msgpack:",inline"`
	BrokerID   int64  `msgpack:"brokerId"`
	BrokerAddr string `msgpack:"brokerAddr"`
	// Epoch is the last epoch in the broker's epoch file.
	Epoch         int32 `msgpack:"epoch"`
	MaxOffset     int64 `msgpack:"maxOffset"`
	ConfirmOffset int64 `msgpack:"confirmOffset"`
	// ElectionPriority: lower wins among equally caught-up candidates.
	ElectionPriority int32 `msgpack:"electionPriority,omitempty"`
	// MayLackAcked: the broker's log may lack messages it had acknowledged
	// (it restarted after an unclean stop under ASYNC_FLUSH, whose copies
	// are acknowledged from memory, and has not caught up with a master's
	// confirm offset since). The controllers elect such a replica only
	// while every SyncStateSet member is heard from, the best of them.
	MayLackAcked bool `msgpack:"mayLackAcked,omitempty"`
}

// Check reports a missing field or a non-positive brokerId.
func (r *ControllerHeartbeatRequest) Check() error {
	if r.BrokerID <= 0 || r.BrokerAddr == "" {
		return fmt.Errorf("%w: brokerId > 0 and brokerAddr are required", ErrInvalidParameter)
	}
	return r.GroupRef.check()
}

// ControllerHeartbeatResponse tells a broker the epochs the leader holds: a
// broker that sees them differ from its own asks GET_REPLICA_INFO.
type ControllerHeartbeatResponse struct {
	MasterEpoch       int32 `msgpack:"masterEpoch"`
	SyncStateSetEpoch int32 `msgpack:"syncStateSetEpoch"`
}

// AlterSyncStateSetRequest is a master's change of its SyncStateSet.
type AlterSyncStateSetRequest struct {
	GroupRef          `msgpack:",inline"`
	MasterID          int64   `msgpack:"masterId"`
	MasterEpoch       int32   `msgpack:"masterEpoch"`
	SyncStateSetEpoch int32   `msgpack:"syncStateSetEpoch"`
	SyncStateSet      []int64 `msgpack:"syncStateSet"`
}

// Check reports a missing field or a set that is empty, too large or holds
// a duplicate or non-positive id.
func (r *AlterSyncStateSetRequest) Check() error {
	if r.MasterID <= 0 {
		return fmt.Errorf("%w: masterId must be > 0", ErrInvalidParameter)
	}
	if err := checkIDSet(r.SyncStateSet); err != nil {
		return err
	}
	return r.GroupRef.check()
}

func checkIDSet(ids []int64) error {
	if len(ids) == 0 || len(ids) > MaxSyncStateSet {
		return fmt.Errorf("%w: syncStateSet holds %d ids, want 1..%d", ErrInvalidParameter, len(ids), MaxSyncStateSet)
	}
	for i, id := range ids {
		if id <= 0 {
			return fmt.Errorf("%w: syncStateSet: brokerId %d", ErrInvalidParameter, id)
		}
		for _, o := range ids[:i] {
			if o == id {
				return fmt.Errorf("%w: syncStateSet: brokerId %d twice", ErrInvalidParameter, id)
			}
		}
	}
	return nil
}

// ElectMasterRequest asks for an election. BrokerID, if not NoBroker, is the
// broker to elect; it must be eligible as any candidate must.
type ElectMasterRequest struct {
	GroupRef `msgpack:",inline"`
	BrokerID int64 `msgpack:"brokerId,omitempty"`
}

// Check reports a missing field or a negative brokerId.
func (r *ElectMasterRequest) Check() error {
	if r.BrokerID < 0 {
		return fmt.Errorf("%w: brokerId %d", ErrInvalidParameter, r.BrokerID)
	}
	return r.GroupRef.check()
}

// GetReplicaInfoRequest asks for a group's replica info. BrokerID, if set,
// is the asker (echoed in the answer).
type GetReplicaInfoRequest struct {
	GroupRef `msgpack:",inline"`
	BrokerID int64 `msgpack:"brokerId,omitempty"`
}

// Check reports a missing field.
func (r *GetReplicaInfoRequest) Check() error { return r.GroupRef.check() }

// GetControllerMetadataRequest asks a controller node who leads.
type GetControllerMetadataRequest struct{}

// Replica is one registered broker of a group.
type Replica struct {
	BrokerID     int64  `msgpack:"brokerId"`
	BrokerAddr   string `msgpack:"brokerAddr"`
	HAServerAddr string `msgpack:"haServerAddr,omitempty"`
	// Alive: the leader holds a fresh heartbeat (always false from a node
	// that does not lead).
	Alive bool `msgpack:"alive,omitempty"`
}

// ReplicaInfo is a group as the controller holds it: the answer to
// REGISTER_BROKER, GET_REPLICA_INFO, ELECT_MASTER and ALTER_SYNC_STATE_SET,
// and the content of NOTIFY_BROKER_ROLE_CHANGED.
type ReplicaInfo struct {
	GroupRef `msgpack:",inline"`
	// BrokerID is the asker's id: the one assigned by REGISTER_BROKER, or
	// the one the request named.
	BrokerID          int64     `msgpack:"brokerId,omitempty"`
	MasterID          int64     `msgpack:"masterId"` // NoBroker: no master yet
	MasterAddr        string    `msgpack:"masterAddr,omitempty"`
	MasterHAAddr      string    `msgpack:"masterHaAddr,omitempty"`
	MasterEpoch       int32     `msgpack:"masterEpoch"`
	SyncStateSet      []int64   `msgpack:"syncStateSet"`
	SyncStateSetEpoch int32     `msgpack:"syncStateSetEpoch"`
	Replicas          []Replica `msgpack:"replicas"` // by brokerId
	// MasterMayLackAcked: the master was elected knowing that its log may
	// lack messages it had acknowledged (ControllerHeartbeatRequest.
	// MayLackAcked), as the best of its whole SyncStateSet. A broker whose
	// log may lack them takes the master role only from such an election,
	// of an epoch it has not begun.
	MasterMayLackAcked bool `msgpack:"masterMayLackAcked,omitempty"`
}

// NotifyBrokerRoleChangedRequest pushes a group's new replica info. It is
// sent one-way; the receiver acts only on an info whose (masterEpoch,
// syncStateSetEpoch) is newer than what it holds.
type NotifyBrokerRoleChangedRequest struct {
	ReplicaInfo `msgpack:",inline"`
}

// ControllerMetadata answers GET_METADATA_INFO. The groups travel in the
// body as a msgpack array of ReplicaInfo maps, sorted by cluster and group,
// as this node has applied them (a follower may lag).
type ControllerMetadata struct {
	IsLeader   bool   `msgpack:"isLeader"`
	LeaderAddr string `msgpack:"leaderAddr,omitempty"`
	// Term is the raft term the node is in (0: not known yet), for
	// operators: the leader is the one of the highest term.
	Term   int64         `msgpack:"term,omitempty"`
	Groups []ReplicaInfo `msgpack:"-"` // the frame body
}

func (r *ControllerMetadata) appendBody(b []byte) ([]byte, error) { return appendList(b, r.Groups) }
func (r *ControllerMetadata) decodeBody(body []byte, lim Limits) (err error) {
	r.Groups, err = decodeStructList[ReplicaInfo](body, lim, "groups")
	return err
}

// newControllerRequest is NewRequest for the controller's codes.
func newControllerRequest(code Code) Request {
	switch code {
	case CodeControllerRegisterBroker:
		return &ControllerRegisterBrokerRequest{}
	case CodeControllerBrokerHeartbeat:
		return &ControllerHeartbeatRequest{}
	case CodeControllerAlterSyncStateSet:
		return &AlterSyncStateSetRequest{}
	case CodeControllerElectMaster:
		return &ElectMasterRequest{}
	case CodeControllerGetReplicaInfo:
		return &GetReplicaInfoRequest{}
	case CodeControllerGetMetadataInfo:
		return &GetControllerMetadataRequest{}
	case CodeNotifyBrokerRoleChanged:
		return &NotifyBrokerRoleChangedRequest{}
	}
	return nil
}

// newControllerResponse is NewResponse for the controller's codes.
func newControllerResponse(code Code) Fields {
	switch code {
	case CodeControllerRegisterBroker, CodeControllerAlterSyncStateSet,
		CodeControllerElectMaster, CodeControllerGetReplicaInfo:
		return &ReplicaInfo{}
	case CodeControllerBrokerHeartbeat:
		return &ControllerHeartbeatResponse{}
	case CodeControllerGetMetadataInfo:
		return &ControllerMetadata{}
	}
	return nil
}

func (*ControllerRegisterBrokerRequest) RequestCode() Code { return CodeControllerRegisterBroker }
func (*ControllerHeartbeatRequest) RequestCode() Code      { return CodeControllerBrokerHeartbeat }
func (*AlterSyncStateSetRequest) RequestCode() Code        { return CodeControllerAlterSyncStateSet }
func (*ElectMasterRequest) RequestCode() Code              { return CodeControllerElectMaster }
func (*GetReplicaInfoRequest) RequestCode() Code           { return CodeControllerGetReplicaInfo }
func (*GetControllerMetadataRequest) RequestCode() Code    { return CodeControllerGetMetadataInfo }
func (*NotifyBrokerRoleChangedRequest) RequestCode() Code  { return CodeNotifyBrokerRoleChanged }

func (*ControllerRegisterBrokerRequest) isFields() {}
func (*ControllerHeartbeatRequest) isFields()      {}
func (*ControllerHeartbeatResponse) isFields()     {}
func (*AlterSyncStateSetRequest) isFields()        {}
func (*ElectMasterRequest) isFields()              {}
func (*GetReplicaInfoRequest) isFields()           {}
func (*GetControllerMetadataRequest) isFields()    {}
func (*NotifyBrokerRoleChangedRequest) isFields()  {}
func (*ReplicaInfo) isFields()                     {}
func (*ControllerMetadata) isFields()              {}

// MarshalValue is the canonical msgpack encoding of v (shortest integers,
// map keys sorted): the same value always gives the same bytes, which is
// what a replicated log entry or a snapshot needs.
func MarshalValue(v any) ([]byte, error) {
	b, err := appendValue(nil, v)
	if err != nil {
		return nil, fmt.Errorf("protocol: encode %T: %w", v, err)
	}
	return b, nil
}

// UnmarshalValue decodes untrusted msgpack into v (a pointer to a struct of
// this package's kind: msgpack tags, scalar, string, slice and struct
// fields), as the request decoders do: Validate first (bounded allocation
// and depth), then the library, then the integer range check. Errors wrap
// ErrFrameIllegal or ErrInvalidParameter.
func UnmarshalValue(b []byte, lim Limits, v any) error {
	lim = lim.norm()
	if err := Validate(b, lim.MaxDepth); err != nil {
		return fmt.Errorf("%w: %w", ErrFrameIllegal, err)
	}
	if err := msgpack.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrFrameIllegal, err)
	}
	return checkInts(b, reflect.TypeOf(v))
}
