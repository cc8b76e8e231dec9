package brokerconf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// Load reads the broker.conf at path over Default(), fills in the derived
// keys, and validates the result. See Parse.
func Load(path string) (Config, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, nil, fmt.Errorf("broker config: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse is Load reading from r; name (usually the file's path) prefixes
// messages.
//
// Unlike RocketMQ, Wharf does not ignore keys silently: an unknown key, a
// key accepted only for compatibility and a key given twice each produce a
// warning ("broker.conf:7: unknown key mapedFileSizeCommitLog (did you mean
// mappedFileSizeCommitLog? ...)"), and so does a ratio clamped to its range.
// A value of the wrong type is an error naming the file, line, key and the
// type wanted; so is a configuration that fails Validate.
func Parse(r io.Reader, name string) (Config, []string, error) {
	c := Default()
	warns, err := c.applyProperties(r, name)
	if err != nil {
		return c, warns, err
	}
	warns = append(warns, c.finish()...)
	return c, warns, c.Validate()
}

// Resolve builds the broker's configuration by precedence: Default(), then
// the file at configPath (if not empty), then the flags of fs the user set
// on the command line (fs.Changed); it then fills in the derived keys and
// validates. fs is a flag set on which RegisterFlags was called; flags of
// fs that are not keys are ignored, and fs may be nil.
func Resolve(fs *pflag.FlagSet, configPath string) (Config, []string, error) {
	c := Default()
	var warns []string
	if configPath != "" {
		f, err := os.Open(configPath)
		if err != nil {
			return c, nil, fmt.Errorf("broker config: %w", err)
		}
		warns, err = c.applyProperties(f, configPath)
		f.Close()
		if err != nil {
			return c, warns, err
		}
	}
	if fs != nil {
		var errs []error
		fs.Visit(func(fl *pflag.Flag) {
			if f, ok := fieldByKey()[fl.Name]; ok {
				if err := c.set(f, fl.Value.String()); err != nil {
					errs = append(errs, fmt.Errorf("flag --%s: %w", fl.Name, err))
				}
			}
		})
		if err := errors.Join(errs...); err != nil {
			return c, warns, err
		}
	}
	warns = append(warns, c.finish()...)
	return c, warns, c.Validate()
}

// applyProperties sets the keys found in r. Every type error is reported,
// joined.
func (c *Config) applyProperties(r io.Reader, name string) ([]string, error) {
	props, err := readProperties(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var warns []string
	var errs []error
	seen := map[string]int{}
	for _, p := range props {
		at := fmt.Sprintf("%s:%d", name, p.line)
		if first, ok := seen[p.key]; ok {
			warns = append(warns, fmt.Sprintf("%s: %s is set again (first on line %d); the last value wins", at, p.key, first))
		}
		seen[p.key] = p.line
		if f, ok := fieldByKey()[p.key]; ok {
			if err := c.set(f, p.value); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", at, p.key, err))
			}
			continue
		}
		if ig, ok := ignoredKeys[p.key]; ok {
			if ig.rejectTrue && strings.EqualFold(p.value, "true") {
				errs = append(errs, fmt.Errorf("%s: %s=true is not supported by Wharf: %s", at, p.key, ig.why))
				continue
			}
			warns = append(warns, fmt.Sprintf("%s: %s is accepted for RocketMQ compatibility but has no effect in Wharf: %s", at, p.key, ig.why))
			continue
		}
		warns = append(warns, fmt.Sprintf("%s: %s", at, unknownKey(p.key)))
	}
	return warns, errors.Join(errs...)
}

// finish fills in the derived keys and clamps the disk ratios to
// RocketMQ's ranges, returning a warning for each value it changed and for
// combinations that are legal but probably not meant.
func (c *Config) finish() []string {
	c.fillDerived()
	var warns []string
	clamp := func(key string, v *int, lo, hi int) {
		if *v < lo || *v > hi {
			nv := min(max(*v, lo), hi)
			warns = append(warns, fmt.Sprintf("%s %d is outside %d-%d; using %d (RocketMQ clamps it the same way)", key, *v, lo, hi, nv))
			*v = nv
		}
	}
	clamp("diskMaxUsedSpaceRatio", &c.DiskMaxUsedSpaceRatio, diskMaxUsedMin, diskMaxUsedMax)
	clamp("diskSpaceCleanForciblyRatio", &c.DiskSpaceCleanForciblyRatio, cleanForciblyMin, cleanForciblyMax)
	clamp("diskSpaceWarningLevelRatio", &c.DiskSpaceWarningLevelRatio, warningLevelMin, warningLevelMax)
	if c.DiskSpaceCleanForciblyRatio >= c.DiskSpaceWarningLevelRatio {
		warns = append(warns, fmt.Sprintf("diskSpaceCleanForciblyRatio %d%% is not below diskSpaceWarningLevelRatio %d%%: writes are refused before forced cleaning starts",
			c.DiskSpaceCleanForciblyRatio, c.DiskSpaceWarningLevelRatio))
	}
	if c.BrokerRole == SyncMaster && c.InSyncReplicas == 1 {
		warns = append(warns, "inSyncReplicas=1 with brokerRole=SYNC_MASTER acknowledges sends without any slave copy, like ASYNC_MASTER")
	}
	if c.EnableControllerMode && (c.BrokerRole != AsyncMaster || c.BrokerID != 0 || c.HAMasterAddress != "") {
		warns = append(warns, "brokerRole, brokerId and haMasterAddress are ignored with enableControllerMode: the controllers assign them")
	} else if c.BrokerRole != Slave && c.HAMasterAddress != "" {
		warns = append(warns, fmt.Sprintf("haMasterAddress %q is ignored: only a SLAVE uses it (brokerRole=%s)", c.HAMasterAddress, c.BrokerRole))
	}
	return warns
}

// renamedKeys maps old or alternative RocketMQ spellings to Wharf's key, with
// a note for the warning.
var renamedKeys = map[string]struct{ to, note string }{
	"mapedFileSizeCommitLog":    {"mappedFileSizeCommitLog", "RocketMQ 4.5.2 renamed it"},
	"mapedFileSizeConsumeQueue": {"mappedFileSizeConsumeQueue", "RocketMQ 4.5.2 renamed it"},
	"haSlaveFallbehindMax":      {"haMaxGapNotInSync", "the RocketMQ 4.x name"},
	"warmMappedFileEnable":      {"warmMapedFileEnable", "RocketMQ spells it with one p"},
}

// unknownKey words the warning for a key Wharf does not know, with a
// suggestion for a near miss.
func unknownKey(key string) string {
	if key == "" {
		return "entry without a key: ignored"
	}
	if r, ok := renamedKeys[key]; ok {
		return fmt.Sprintf("unknown key %s (did you mean %s? %s): ignored", key, r.to, r.note)
	}
	if s := suggest(key); s != "" {
		return fmt.Sprintf("unknown key %s (did you mean %s?): ignored", key, s)
	}
	return fmt.Sprintf("unknown key %s: ignored", key)
}

// suggest returns the known key closest to key, or "" if none is close:
// a key equal but for case, or one within a small edit distance.
func suggest(key string) string {
	var known []string
	for k := range fieldByKey() {
		known = append(known, k)
	}
	for k := range ignoredKeys {
		known = append(known, k)
	}
	sort.Strings(known)
	lk := strings.ToLower(key)
	best, bestDist := "", min(3, max(1, len(key)/4))+1
	for _, k := range known {
		d := editDistance(lk, strings.ToLower(k))
		if d == 0 {
			return k
		}
		if d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ignoredKey is a RocketMQ key Wharf accepts without effect.
type ignoredKey struct {
	why        string
	rejectTrue bool // "true" would change semantics Wharf does not offer: an error
}

// ignoredKeys are RocketMQ broker.conf keys that are accepted, with a
// warning, because they tune machinery Wharf does not have. They are not
// flags.
var ignoredKeys = map[string]ignoredKey{
	"sendMessageThreadPoolNums":        {why: "one CommitLogWriter actor appends every message"},
	"pullMessageThreadPoolNums":        {why: "Wharf has no request thread pools"},
	"queryMessageThreadPoolNums":       {why: "Wharf has no request thread pools"},
	"adminBrokerThreadPoolNums":        {why: "Wharf has no request thread pools"},
	"sendThreadPoolQueueCapacity":      {why: "Wharf has no request thread pools"},
	"pullThreadPoolQueueCapacity":      {why: "Wharf has no request thread pools"},
	"waitTimeMillsInSendQueue":         {why: "sends are not queued behind a thread pool"},
	"useReentrantLockWhenPutMessage":   {why: "a single writer appends without a lock"},
	"osPageCacheBusyTimeOutMills":      {why: "there is no put-message lock to time"},
	"transientStorePoolEnable":         {why: "appends go straight to the mapped segment"},
	"transientStorePoolSize":           {why: "appends go straight to the mapped segment"},
	"commitIntervalCommitLog":          {why: "there is no transient store pool to commit from"},
	"commitCommitLogLeastPages":        {why: "there is no transient store pool to commit from"},
	"commitCommitLogThoroughInterval":  {why: "there is no transient store pool to commit from"},
	"deleteCommitLogFilesInterval":     {why: "a retention pass deletes its segments without pauses"},
	"deleteFileBatchMax":               {why: "a retention pass deletes every segment that is due"},
	"destroyMapedFileIntervalForcibly": {why: "deleted segments are unmapped at the next retention pass"},
	"redeleteHangedFileInterval":       {why: "deleted segments are unmapped at the next retention pass"},
	"cleanFileForciblyEnable":          {why: "cleaning above diskSpaceCleanForciblyRatio is always on"},
	"registerBrokerTimeoutMills":       {why: "a name server that leaves a request unanswered for brokerNotActiveTimeoutMillis is reconnected"},
	"transferMsgByHeap":                {why: "responses are encoded into the connection's buffer"},
	"serverWorkerThreads":              {why: "the network engine sizes its event loops"},
	"serverSelectorThreads":            {why: "the network engine sizes its event loops"},
	"timerWheelEnable":                 {why: "delays use messageDelayLevel"},
	"timerMaxDelaySec":                 {why: "delays use messageDelayLevel"},
	"totalReplicas":                    {why: "SYNC_MASTER counts copies with inSyncReplicas"},
	"minInSyncReplicas":                {why: "SYNC_MASTER counts copies with inSyncReplicas"},
	"enableDLegerCommitLog":            {why: "Wharf replicates with master/slave roles", rejectTrue: true},
}
