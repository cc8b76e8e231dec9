package protocol

// CodeUpdateBrokerRole (UPDATE_BROKER_ROLE) turns a running broker into a
// master or into a slave of a given master, without a restart.
const CodeUpdateBrokerRole Code = 4005

func init() { codeNames[CodeUpdateBrokerRole] = "UPDATE_BROKER_ROLE" }

// UpdateBrokerRoleRequest sets the broker's role: ASYNC_MASTER,
// SYNC_MASTER, or SLAVE of HAMasterAddress (the master's host:haListenPort).
// A slave reports BrokerID to its master (0 keeps the broker's own id, or
// 1 for a master that becomes a slave). The answer comes once the role is
// in force; a slave whose log is not a prefix of its new master's is then
// refused by the master (GET_BROKER_RUNTIME_INFO's haStatus says why).
type UpdateBrokerRoleRequest struct {
	BrokerRole      string `msgpack:"brokerRole"`
	HAMasterAddress string `msgpack:"haMasterAddress,omitempty"`
	BrokerID        int64  `msgpack:"brokerId,omitempty"`
}

func (*UpdateBrokerRoleRequest) isFields() {}

// RequestCode implements Request.
func (*UpdateBrokerRoleRequest) RequestCode() Code { return CodeUpdateBrokerRole }
