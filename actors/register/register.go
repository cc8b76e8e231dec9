package register

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Defaults of Config's durations.
const (
	DefaultHeartbeatInterval = time.Second
	DefaultLease             = 5 * time.Second
	DefaultRegisterPeriod    = 30 * time.Second
	DefaultBackoffMin        = 100 * time.Millisecond
	DefaultBackoffMax        = 3 * time.Second
	DefaultStopTimeout       = time.Second
)

// Config is the broker's identity and the registration cadence.
type Config struct {
	Identity     protocol.BrokerIdentity // the BrokerID is replaced by Role's
	HAServerAddr string
	RemotingAddr string // host:remotingListenPort, empty when off
	Role         string
	NameServers  []string
	// Version is the data version to start from: Timestamp the broker's
	// start (Unix ms), Counter the topic changes already counted by an
	// earlier incarnation of the caller (so a restarted shell never goes
	// back to a version a name server holds).
	Version protocol.DataVersion

	HeartbeatInterval time.Duration // 0: DefaultHeartbeatInterval
	Lease             time.Duration // asked for (heartbeatTimeoutMillis); 0: DefaultLease
	RegisterPeriod    time.Duration // full re-registration; 0: DefaultRegisterPeriod
	RequestTimeout    time.Duration // an answer's wait before the link is closed; 0: Lease
	BackoffMin        time.Duration // first redial delay after a failure; 0: DefaultBackoffMin
	BackoffMax        time.Duration // 0: DefaultBackoffMax
	StopTimeout       time.Duration // the wait for UNREGISTER's answers; 0: DefaultStopTimeout
}

func (c *Config) norm() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&c.Lease, DefaultLease)
	def(&c.RegisterPeriod, DefaultRegisterPeriod)
	def(&c.RequestTimeout, c.Lease)
	def(&c.BackoffMin, DefaultBackoffMin)
	def(&c.BackoffMax, max(DefaultBackoffMax, c.BackoffMin))
	def(&c.StopTimeout, DefaultStopTimeout)
}

// Call is a request to send on the link to Addr; its answer comes back
// through Answer with the same Opaque.
type Call struct {
	Addr   string
	Opaque uint32
	Req    protocol.Request
}

// Close asks for the link to Addr (link id Link) to be closed.
type Close struct {
	Addr   string
	Link   uint64
	Reason string
}

// Ready is what the caller must do after an input.
type Ready struct {
	Dials  []string // dial these name servers now; report each with Dialed
	Calls  []Call   // send these, in order
	Closes []Close  // close these links (the Registrar already counts them down)
	// Done: after Stop, every UNREGISTER was answered or timed out.
	Done bool
}

type linkState uint8

const (
	down    linkState = iota // dial at dialAt
	dialing                  // a dial is out
	up
)

// kind is what a request in flight was.
type kind uint8

const (
	kindRegister kind = iota
	kindHeartbeat
	kindUnregister
)

type inflight struct {
	kind     kind
	version  protocol.DataVersion
	id       protocol.BrokerIdentity
	deadline time.Time
}

// server is one name server as the Registrar sees it.
type server struct {
	addr       string
	state      linkState
	link       uint64
	dialAt     time.Time // when down: the next dial
	backoff    time.Duration
	registered bool      // the current identity and version are held there
	regAt      time.Time // a registration is due (zero: none)
	beatAt     time.Time // the next heartbeat
	fullAt     time.Time // the next periodic full registration
	lease      time.Duration
	calls      map[uint32]inflight
}

// Registrar is the broker's registration with its name servers.
type Registrar struct {
	cfg      Config
	id       protocol.BrokerIdentity
	role     string
	epoch    int32 // the controller's master epoch of the role (0: classic mode)
	version  protocol.DataVersion
	topics   []protocol.TopicConfig
	servers  []*server
	byAddr   map[string]*server
	opaque   uint32
	started  bool
	stopping bool
	stopBy   time.Time
	done     bool
	rd       Ready
}

// ErrInvalid reports a Config the Registrar cannot work with.
var ErrInvalid = errors.New("register: invalid config")

// New returns a Registrar; Start begins its work.
func New(cfg Config) (*Registrar, error) {
	cfg.norm()
	if len(cfg.NameServers) == 0 {
		return nil, fmt.Errorf("%w: no name server", ErrInvalid)
	}
	if cfg.Identity.ClusterName == "" || cfg.Identity.BrokerName == "" || cfg.Identity.BrokerAddr == "" {
		return nil, fmt.Errorf("%w: clusterName, brokerName and brokerAddr are required", ErrInvalid)
	}
	r := &Registrar{cfg: cfg, id: cfg.Identity, role: cfg.Role, version: cfg.Version, byAddr: map[string]*server{}}
	for _, a := range cfg.NameServers {
		if _, dup := r.byAddr[a]; dup || a == "" {
			return nil, fmt.Errorf("%w: name server %q empty or listed twice", ErrInvalid, a)
		}
		s := &server{addr: a, calls: map[uint32]inflight{}}
		r.servers = append(r.servers, s)
		r.byAddr[a] = s
	}
	return r, nil
}

// Version is the current data version.
func (r *Registrar) Version() protocol.DataVersion { return r.version }

// Start dials every name server, with the topics held at start.
func (r *Registrar) Start(now time.Time, topics []protocol.TopicConfig) {
	r.topics = sortTopics(topics)
	r.started = true
	for _, s := range r.servers {
		s.dialAt = now
	}
	r.Tick(now)
}

// Dialed reports the outcome of a dial of addr: the link's id, or err.
func (r *Registrar) Dialed(now time.Time, addr string, link uint64, err error) {
	s := r.byAddr[addr]
	if s == nil || s.state != dialing {
		if err == nil && s != nil {
			r.rd.Closes = append(r.rd.Closes, Close{Addr: addr, Link: link, Reason: "not dialling this name server"})
		}
		return
	}
	if err != nil {
		r.down(s, now, true)
		return
	}
	if r.stopping {
		r.rd.Closes = append(r.rd.Closes, Close{Addr: addr, Link: link, Reason: "the broker is stopping"})
		s.state = down
		return
	}
	s.state, s.link, s.registered = up, link, false
	s.regAt, s.beatAt, s.fullAt = now, now.Add(r.cfg.HeartbeatInterval), now.Add(r.cfg.RegisterPeriod)
	r.Tick(now)
}

// Closed reports that link to addr went down.
func (r *Registrar) Closed(now time.Time, addr string, link uint64) {
	if s := r.byAddr[addr]; s != nil && s.state == up && s.link == link {
		r.down(s, now, false)
		r.Tick(now)
	}
}

// down forgets s's link and schedules the next dial after the backoff: a
// link that was answering is redialled at once, a failed dial never is.
func (r *Registrar) down(s *server, now time.Time, failedDial bool) {
	s.state, s.link, s.registered = down, 0, false
	clear(s.calls)
	if failedDial {
		s.backoff = max(s.backoff, r.cfg.BackoffMin)
	}
	s.dialAt = now.Add(s.backoff)
	s.backoff = min(max(2*s.backoff, r.cfg.BackoffMin), r.cfg.BackoffMax)
	r.checkDone()
}

// Topics reports the broker's topic table (any order). A change grows the
// data version and registers at once with every name server up.
func (r *Registrar) Topics(now time.Time, topics []protocol.TopicConfig) {
	next := sortTopics(topics)
	if slices.Equal(next, r.topics) {
		return
	}
	r.topics = next
	r.version.Counter++
	r.registerAll(now)
}

// Role reports the broker's role and brokerId. A change registers at
// once; a new brokerId first unregisters the old one, whose slot would
// otherwise stay alive until its lease ends.
func (r *Registrar) Role(now time.Time, role string, brokerID int64, epoch int32) {
	if role == r.role && brokerID == r.id.BrokerID && epoch == r.epoch {
		return
	}
	old := r.id
	r.role, r.id.BrokerID, r.epoch = role, brokerID, epoch
	if old.BrokerID != brokerID {
		for _, s := range r.servers {
			if s.state == up && !r.stopping {
				r.call(s, now, kindUnregister, &protocol.UnregisterBrokerRequest{BrokerIdentity: old})
			}
		}
	}
	r.registerAll(now)
}

func (r *Registrar) registerAll(now time.Time) {
	for _, s := range r.servers {
		s.registered = false
		if s.state == up {
			s.regAt = now
		}
	}
	r.Tick(now)
}

func sortTopics(topics []protocol.TopicConfig) []protocol.TopicConfig {
	out := slices.Clone(topics)
	slices.SortFunc(out, func(a, b protocol.TopicConfig) int {
		switch {
		case a.Topic < b.Topic:
			return -1
		case a.Topic > b.Topic:
			return 1
		}
		return 0
	})
	return out
}
