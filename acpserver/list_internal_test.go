package acpserver

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/journal"
)

// TestACancelledListSaysSo: session/list cancelled while it reads the
// journal ($/cancel_request) is answered as cancelled (the SDK's
// "Request cancelled"), not with an internal error telling the user to
// check the journal's file (an outsider's finding, 20 times in 20).
func TestACancelledListSaysSo(t *testing.T) {
	ctx := context.Background()
	srv := &server{cfg: Config{Surface: agent.Surface{Journal: testRecorder(t)}}}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := srv.ListSessions(cancelled, acp.ListSessionsRequest{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("session/list, cancelled: %v; want context.Canceled", err)
	}
	if re := requestError(err); re.Code != -32800 {
		t.Errorf("answered as %+v, want code -32800 (Request cancelled)", re)
	}
	if _, err := srv.ListSessions(ctx, acp.ListSessionsRequest{}); err != nil {
		t.Errorf("session/list: %v", err)
	}
}

// testRecorder is a journal's recorder in a temporary directory, closed
// when the test ends, after the cleanups registered later (a harness's).
func testRecorder(t *testing.T) *journal.Recorder {
	t.Helper()
	ctx := context.Background()
	store, err := journal.OpenSQLite(filepath.Join(t.TempDir(), "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close(ctx) })
	return rec
}
