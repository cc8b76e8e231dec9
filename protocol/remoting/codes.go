package remoting

// Serialize types: the top byte of the frame's second word.
const (
	SerializeJSON     byte = 0 // RemotingSerializable: a JSON header
	SerializeRocketMQ byte = 1 // RocketMQSerializable: the binary header
)

// Flag bits of a command.
const (
	FlagResponse int32 = 1 << 0 // the command answers a request
	FlagOneway   int32 = 1 << 1 // the request wants no answer
)

// Language codes (RocketMQ's LanguageCode ordinals) of the ones named here.
const (
	LangJava   byte = 0
	LangCPP    byte = 1
	LangDotnet byte = 2
	LangPython byte = 3
	LangGo     byte = 9
	LangRust   byte = 12
	LangNodeJS byte = 13
	LangOther  byte = 7
)

var langNames = map[byte]string{
	LangJava: "JAVA", LangCPP: "CPP", LangDotnet: "DOTNET", LangPython: "PYTHON", 4: "DELPHI", 5: "ERLANG",
	6: "RUBY", LangOther: "OTHER", 8: "HTTP", LangGo: "GO", 10: "PHP", 11: "OMS", LangRust: "RUST", LangNodeJS: "NODE_JS",
}

// LanguageName is the JSON spelling of a language code ("GO"); unknown codes
// are "OTHER".
func LanguageName(c byte) string {
	if n, ok := langNames[c]; ok {
		return n
	}
	return "OTHER"
}

// languageCode is the code of a JSON language name; unknown names are OTHER.
func languageCode(name string) byte {
	for c, n := range langNames {
		if n == name {
			return c
		}
	}
	return LangOther
}

// Request codes (RocketMQ's RequestCode) that Wharf serves or names.
const (
	SendMessage                int32 = 10
	PullMessage                int32 = 11
	QueryMessage               int32 = 12
	QueryConsumerOffset        int32 = 14
	UpdateConsumerOffset       int32 = 15
	UpdateAndCreateTopic       int32 = 17
	GetAllTopicConfig          int32 = 21
	SearchOffsetByTimestamp    int32 = 29
	GetMaxOffset               int32 = 30
	GetMinOffset               int32 = 31
	ViewMessageByID            int32 = 33
	HeartBeat                  int32 = 34
	UnregisterClient           int32 = 35
	ConsumerSendMsgBack        int32 = 36
	EndTransaction             int32 = 37
	GetConsumerListByGroup     int32 = 38
	CheckTransactionState      int32 = 39
	NotifyConsumerIdsChanged   int32 = 40
	LockBatchMQ                int32 = 41
	UnlockBatchMQ              int32 = 42
	RegisterBroker             int32 = 103
	UnregisterBroker           int32 = 104
	GetRouteInfoByTopic        int32 = 105
	GetBrokerClusterInfo       int32 = 106
	GetAllTopicListFromNameSrv int32 = 206
	DeleteTopicInBroker        int32 = 215
	DeleteTopicInNamesrv       int32 = 216
	GetConsumerRunningInfo     int32 = 307
	SendMessageV2              int32 = 310
	SendBatchMessage           int32 = 320
	LitePullMessage            int32 = 361
)

// Response codes (RocketMQ's ResponseCode and RemotingSysResponseCode).
const (
	Success                   int32 = 0
	SystemError               int32 = 1
	SystemBusy                int32 = 2
	RequestCodeNotSupported   int32 = 3
	FlushDiskTimeout          int32 = 10
	SlaveNotAvailable         int32 = 11
	FlushSlaveTimeout         int32 = 12
	MessageIllegal            int32 = 13
	ServiceNotAvailable       int32 = 14
	VersionNotSupported       int32 = 15
	NoPermission              int32 = 16
	TopicNotExist             int32 = 17
	TopicExistAlready         int32 = 18
	PullNotFound              int32 = 19
	PullRetryImmediately      int32 = 20
	PullOffsetMoved           int32 = 21
	QueryNotFound             int32 = 22
	SubscriptionParseFailed   int32 = 23
	SubscriptionNotExist      int32 = 24
	SubscriptionNotLatest     int32 = 25
	SubscriptionGroupNotExist int32 = 26
	InvalidParameter          int32 = 29
)
