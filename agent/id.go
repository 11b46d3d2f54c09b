package agent

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// NewID returns a fresh session id: the UTC time to the second, then
// random hex ("20260102-150405-a1b2c3"), so ids sort by when their
// sessions started. Every surface names its sessions this way (a
// journal's Recorder does, for a session given none), so one column of
// `offstage tasks` holds one format.
func NewID() string {
	var b [3]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}
