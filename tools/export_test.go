package tools

// Constants the description tests compare with the .md files.
const (
	DefaultYieldSeconds = defaultYieldSeconds
	DefaultWaitSeconds  = defaultWaitSeconds
	MaxWaitSeconds      = maxWaitSeconds
	MaxWaitIDs          = maxWaitIDs
	DefaultRecent       = defaultRecent
	MaxRecent           = maxRecent
	OutputBytes         = outputBytes
	MaxListed           = maxListed
	DefaultListed       = defaultListed
	MaxNotifyOnChars    = maxNotifyOnChars
	DefaultWatchLines   = defaultWatchLines
	DefaultWatchEvery   = defaultWatchEvery
	DefaultWatchNotices = defaultWatchNotices
	PortPoll            = portPoll
)

// FitBudget exposes the last guard on a result's size.
var FitBudget = fitBudget

// FilterLines exposes task_output's filter.
var FilterLines = filterLines

// Seconds2d turns a model's seconds into a duration.
var Seconds2d = seconds2d

// WholeNumber is wholeNumber, for its test.
var WholeNumber = wholeNumber
