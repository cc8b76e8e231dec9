package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/wharfmq/wharf/storage/vfs"
)

// maxConfigFile bounds what LoadJSON reads: config files are small, and a
// damaged size field must not make the broker allocate gigabytes.
const maxConfigFile = 256 << 20

// Config file names under ${storePathRootDir}/config, as in RocketMQ.
const (
	TopicsFile             = "topics.json"
	ConsumerOffsetsFile    = "consumerOffset.json"
	SubscriptionGroupsFile = "subscriptionGroup.json"
)

// ConfigPath is the path of a config file under the store root.
func ConfigPath(root, name string) string { return path.Join(root, "config", name) }

// SaveJSON writes v as indented JSON to name atomically: the previous
// version is kept as name.bak, the new one is written to a temp file, synced,
// renamed over name, and the directory synced. A crash at any point leaves
// either the old or the new content, never a mix.
func SaveJSON(fsys vfs.FS, name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("config %s: encode: %w", name, err)
	}
	if err := fsys.MkdirAll(path.Dir(name)); err != nil {
		return fmt.Errorf("config %s: %w", name, err)
	}
	if old, ok, err := readFile(fsys, name, maxConfigFile); err == nil && ok && json.Valid(old) {
		if err := writeFileAtomic(fsys, name+".bak", old); err != nil {
			return fmt.Errorf("config %s: backup: %w", name, err)
		}
	}
	if err := writeFileAtomic(fsys, name, append(data, '\n')); err != nil {
		return fmt.Errorf("config %s: %w", name, err)
	}
	return nil
}

// LoadJSON reads name into v. ok is false if neither name nor its backup
// exists. If name is damaged, the backup is used; if both are, the error says
// so (the broker refuses to start rather than forget topics or offsets).
func LoadJSON(fsys vfs.FS, name string, v any) (ok bool, err error) {
	data, found, err := readFile(fsys, name, maxConfigFile)
	if err == nil && found {
		if err = json.Unmarshal(data, v); err == nil {
			return true, nil
		}
		err = fmt.Errorf("config %s: %w", name, err)
	}
	bak, bfound, berr := readFile(fsys, name+".bak", maxConfigFile)
	if berr == nil && bfound {
		if berr = json.Unmarshal(bak, v); berr == nil {
			return true, nil
		}
	}
	if err == nil && !found && berr == nil && !bfound {
		return false, nil
	}
	return false, errors.Join(err, berr)
}

// Permissions of a topic, as RocketMQ's PermName bits.
const (
	PermInherit = 1 << 0
	PermRead    = 1 << 2
	PermWrite   = 1 << 1
)

// TopicConfig is one topic's configuration.
type TopicConfig struct {
	TopicName      string `json:"topicName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	Order          bool   `json:"order,omitempty"`
}

// TopicTable is the content of topics.json.
type TopicTable struct {
	Topics      map[string]TopicConfig `json:"topicConfigTable"`
	DataVersion int64                  `json:"dataVersion"`
}

// ConsumerOffsetTable is the content of consumerOffset.json: for each
// "topic@group", the committed offset of each queue id.
type ConsumerOffsetTable struct {
	Offsets map[string]map[int32]int64 `json:"offsetTable"`
}

// SubscriptionGroupConfig is one consumer group's configuration.
type SubscriptionGroupConfig struct {
	GroupName        string `json:"groupName"`
	ConsumeEnable    bool   `json:"consumeEnable"`
	ConsumeBroadcast bool   `json:"consumeBroadcastEnable"`
	RetryMaxTimes    int32  `json:"retryMaxTimes"`
	RetryQueueNums   int32  `json:"retryQueueNums"`
	ConsumeOrderly   bool   `json:"consumeMessageOrderly,omitempty"`
	AllocateStrategy string `json:"allocateStrategy,omitempty"`
}

// SubscriptionGroupTable is the content of subscriptionGroup.json.
type SubscriptionGroupTable struct {
	Groups      map[string]SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	DataVersion int64                              `json:"dataVersion"`
}
