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
	MaxNotifyOnChars    = maxNotifyOnChars
)

// FitBudget exposes the last guard on a result's size.
var FitBudget = fitBudget
