package journal_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fmt"

	"os/exec"
	"runtime"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// said collects what a Recorder reports.
type said struct {
	mu   sync.Mutex
	msgs []string
}

func (s *said) report(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, msg)
}

func (s *said) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.msgs, "\n")
}

// newRecorder opens the SQLite journal in dir as a process would at its
// start.
func newRecorder(t *testing.T, dir string, opts journal.RecorderOptions) *journal.Recorder {
	t.Helper()
	store := open(t, filepath.Join(dir, "journal.db"))
	if opts.LogDir == "" {
		opts.LogDir = filepath.Join(dir, "logs")
	}
	rec, err := journal.NewRecorder(t.Context(), store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func scriptedModel(t *testing.T, script string) *scripted.Model {
	t.Helper()
	m, err := scripted.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAResumedSessionHearsEachResultOnce: the embedder's path, through
// agent.Open and a Recorder only. A session starts a background shell and
// ends before its result reaches the model; a resume tells the model the
// result, numbers its messages and tasks on, and a second resume tells
// nothing again. No call to Delivered, no host record by hand.
func TestAResumedSessionHearsEachResultOnce(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	model := scriptedModel(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo built", "run_in_background": true}}]},
		{"text": "It builds."},
		{"expect": "(?s)background-result.*shell:1.*built", "text": "It built.", "tool_calls": [{"name": "bash", "input": {"command": "echo again"}}]},
		{"expect": "shell:2", "text": "Done."}
	]}`)
	cfg := agent.Config{Model: model, Tools: tools.Config{Process: proc.Config{Dir: work}}}

	rec := newRecorder(t, dir, journal.RecorderOptions{})
	s, err := agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Turn(t.Context(), "build it", agent.Discard); err != nil {
		t.Fatal(err)
	}
	done, err := s.Table().Done("shell:1") // finished, and not delivered: nothing drains it
	if err != nil {
		t.Fatal(err)
	}
	<-done
	id := s.ID()
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	rec = newRecorder(t, dir, journal.RecorderOptions{})
	s, err = agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec, ID: id, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	res := s.Resumed()
	if s.ID() != id || len(res.History) != 4 || len(res.Results) != 1 || res.Results[0].ID != "shell:1" {
		t.Fatalf("resumed %s: %d messages, results %+v", s.ID(), len(res.History), res.Results)
	}
	if _, err := s.Turn(t.Context(), "and now?", agent.Discard); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	rec = newRecorder(t, dir, journal.RecorderOptions{})
	defer rec.Close(context.Background())
	s, err = agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec, ID: id, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if res := s.Resumed(); len(res.Results) != 0 || len(res.Notices) != 0 || len(res.History) != 9 {
		t.Errorf("a second resume: %d messages, results %+v, notices %+v; want 9 messages and nothing told again", len(res.History), res.Results, res.Notices)
	}
	msgs, err := rec.Store().History(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		if m.Seq != i+1 {
			t.Errorf("message %d has seq %d: a resumed session must number on, not overwrite", i, m.Seq)
		}
	}
	if len(msgs) == 0 || !bytes.Contains(msgs[0].Body, []byte("build it")) {
		t.Errorf("the first message is no longer the first prompt: %d messages", len(msgs))
	}
}

// TestAResumeFailsClosedWhenItCannotTellTheHost (issue 21, E2): a
// session still open in another process must not be resumed twice; when
// the journal cannot say whether that process lives, the resume is
// refused, not let through.
func TestAResumeFailsClosedWhenItCannotTellTheHost(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	cfg := agent.Config{Model: scriptedModel(t, `{"turns": []}`), Tools: tools.Config{Process: proc.Config{Dir: work}}}
	rec := newRecorder(t, dir, journal.RecorderOptions{})
	s, err := agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec})
	if err != nil {
		t.Fatal(err)
	}
	// The first process "dies": its journal stops before its session ends.
	if err := rec.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Close(t.Context()) // its end is lost with the journal: the session stays open on record

	var news said
	rec = newRecorder(t, dir, journal.RecorderOptions{Report: news.report})
	defer rec.Close(context.Background())
	db := rawSQLite(t, filepath.Join(dir, "journal.db"))
	defer db.Close()
	if _, err := db.Exec(`ALTER TABLE hosts DROP COLUMN version`); err != nil { // the hosts cannot be read any more
		t.Fatal(err)
	}
	_, err = agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec, ID: s.ID(), Resume: true})
	if err == nil || !strings.Contains(err.Error(), "cannot tell whether session") {
		t.Fatalf("resuming a session whose host cannot be checked = %v, want it refused", err)
	}
}

// TestARecorderMarksADeadProcessesTasksOrphaned: opening a Recorder is
// all an embedder does for crash recovery: a task the dead process left
// running is orphaned and a resume tells the model so, with its output.
func TestARecorderMarksADeadProcessesTasksOrphaned(t *testing.T) {
	dir := t.TempDir()
	store := open(t, filepath.Join(dir, "journal.db"))
	dead := journal.Host{ID: "dead", Hostname: hostname(t), PID: 1 << 22, Start: 1, Started: time.Now()}
	logPath := filepath.Join(dir, "logs", "20261125-000000-aaaaaa", "shell-1.log")
	os.MkdirAll(filepath.Dir(logPath), 0o700)
	os.WriteFile(logPath, []byte("compiling\nlinking\n"), 0o600)
	j := journal.New(store, journal.Options{})
	j.Add(&dead)
	log := j.StartSession(journal.Session{ID: "20261125-000000-aaaaaa", HostID: "dead", Surface: "embed", Started: time.Now()}, 0)
	log.Record(&task.Change{Event: task.Event{Type: task.EventSpawned, ID: "shell:1", Kind: "shell", Time: time.Now()}, Label: "make"})
	log.Process("shell:1", 1<<22, 1, logPath)
	if err := j.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	var news said
	rec := newRecorder(t, dir, journal.RecorderOptions{Report: news.report})
	defer rec.Close(context.Background())
	if !strings.Contains(news.String(), "1 task of a process that is gone marked orphaned") {
		t.Errorf("reported: %q", news.String())
	}
	res, err := rec.Load(t.Context(), "20261125-000000-aaaaaa")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Notices) != 1 || !strings.Contains(res.Notices[0].Text, "shell:1 (make)") || !strings.Contains(res.Notices[0].Text, "linking") || res.FirstID != 1 {
		t.Errorf("resume = %+v", res)
	}
}

// TestLoadTakesTheWholeIDAndResolveAStart pins a leftover of the ACP
// review: Load took the start of an id, so ACP's session/load of one
// loaded a session that then went by the start, and a start two ids share
// failed as if the journal were broken. Load takes the whole id;
// Resolve, for a person typing one, takes a start and says when it is
// not one session's.
func TestLoadTakesTheWholeIDAndResolveAStart(t *testing.T) {
	rec := newRecorder(t, t.TempDir(), journal.RecorderOptions{})
	defer rec.Close(context.Background())
	for _, id := range []string{"20261125-000000-aaaaaa", "20261125-000000-bbbbbb"} {
		var cfg agent.Config
		r, err := rec.Record(t.Context(), agent.SessionInfo{ID: id, Surface: "embed"}, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.End()
	}
	if _, err := rec.Load(t.Context(), "20261125-000000-a"); !errors.Is(err, agent.ErrUnknownSession) || !strings.Contains(err.Error(), `no session "20261125-000000-a"`) {
		t.Errorf("Load(a start of one id) = %v, want no such session", err)
	}
	if res, err := rec.Load(t.Context(), "20261125-000000-aaaaaa"); err != nil || res.ID != "20261125-000000-aaaaaa" {
		t.Errorf("Load(the whole id) = %+v, %v", res, err)
	}
	if id, err := rec.Resolve(t.Context(), "20261125-000000-b"); err != nil || id != "20261125-000000-bbbbbb" {
		t.Errorf("Resolve(a start of one id) = %q, %v", id, err)
	}
	_, err := rec.Resolve(t.Context(), "20261125")
	if !errors.Is(err, agent.ErrUnknownSession) || !strings.Contains(err.Error(), `more than one session`) || !strings.Contains(err.Error(), `starts with "20261125"`) || strings.Contains(err.Error(), "cannot be used") {
		t.Errorf("Resolve(a start of two ids) = %v, want it said, not blamed on the journal", err)
	}
	if _, err := rec.Store().Session(t.Context(), "20261125"); err == nil || strings.Contains(rec.Store().Explain(err).Error(), "cannot be used") {
		t.Errorf("Explain(Session(a start of two ids)) = %v, want the id blamed, not the journal", rec.Store().Explain(err))
	}
	if _, err := rec.Resolve(t.Context(), "2027\x1b"); !errors.Is(err, agent.ErrUnknownSession) || !strings.Contains(err.Error(), `no session "2027\x1b"`) {
		t.Errorf("Resolve(unknown) = %v", err)
	}
}

// TestOldestLogsGoFirst: past the cap on all logs, the oldest sessions'
// logs are removed (never the starting one's), and it is said.
func TestOldestLogsGoFirst(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{"20261120-000000-aaaaaa", "20261121-000000-bbbbbb", "20261122-000000-cccccc", "20261122-090000-dddddd"} {
		os.MkdirAll(filepath.Join(dir, "logs", s), 0o700)
		os.WriteFile(filepath.Join(dir, "logs", s, "shell-1.log"), bytes.Repeat([]byte("x"), 100<<10), 0o600)
	}
	var news said
	rec := newRecorder(t, dir, journal.RecorderOptions{MaxLogBytes: 250 << 10, Report: news.report})
	defer rec.Close(context.Background())
	var cfg agent.Config
	if _, err := rec.Record(t.Context(), agent.SessionInfo{ID: "20261120-000000-aaaaaa", Resume: &agent.Resume{}}, &cfg); err != nil { // the current session, oldest by name
		t.Fatal(err)
	}
	left, _ := os.ReadDir(filepath.Join(dir, "logs"))
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "20261120-000000-aaaaaa 20261122-090000-dddddd" {
		t.Errorf("logs left: %s", got)
	}
	if !strings.Contains(news.String(), "removed the output logs of the 2 oldest sessions (200 KiB) to keep all logs under 250 KiB.") {
		t.Errorf("reported: %q", news.String())
	}
	if cfg.Tools.LogDir != filepath.Join(dir, "logs", "20261120-000000-aaaaaa") || cfg.Tasks.Recorder == nil || cfg.OnMessage == nil || cfg.Tools.OnShell == nil {
		t.Errorf("the session's configuration is not hooked up: %+v", cfg)
	}
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestTheLatestSessionHasAConversation: a conversation whose input ended
// at once (no message) is not what --resume continues; the one before it
// is.
func TestTheLatestSessionHasAConversation(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder(t, dir, journal.RecorderOptions{})
	defer rec.Close(context.Background())
	var cfg agent.Config
	if _, err := rec.Record(t.Context(), agent.SessionInfo{ID: "20261125-000000-aaaaaa", Surface: "run"}, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.OnMessage(provider.Message{Role: provider.User, Content: []provider.Block{{Type: provider.Text, Text: "hello"}}})
	var empty agent.Config
	if _, err := rec.Record(t.Context(), agent.SessionInfo{ID: "20261125-000001-bbbbbb", Surface: "run"}, &empty); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if id, err := rec.Latest(t.Context(), "run"); err != nil || id != "20261125-000000-aaaaaa" {
		t.Errorf("Latest = %q, %v; want the session with a message", id, err)
	}
}

// TestAnOpenSessionsLogsAreKept (an attacker's trial, F20): pruning the
// logs as a session starts spared only that session's; another session
// still running (of this process, or of another sharing the directory)
// lost the log its commands were writing.
func TestAnOpenSessionsLogsAreKept(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{"20261120-000000-aaaaaa", "20261121-000000-bbbbbb"} {
		os.MkdirAll(filepath.Join(dir, "logs", s), 0o700)
		os.WriteFile(filepath.Join(dir, "logs", s, "shell-1.log"), bytes.Repeat([]byte("x"), 100<<10), 0o600)
	}
	rec := newRecorder(t, dir, journal.RecorderOptions{MaxLogBytes: 50 << 10})
	defer rec.Close(context.Background())
	var running agent.Config
	if _, err := rec.Record(t.Context(), agent.SessionInfo{ID: "20261120-000000-aaaaaa", Surface: "mcp"}, &running); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var next agent.Config
	if _, err := rec.Record(t.Context(), agent.SessionInfo{ID: "20261122-000000-cccccc", Surface: "mcp"}, &next); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "logs", "20261120-000000-aaaaaa", "shell-1.log")); err != nil {
		t.Errorf("the running session's log was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "logs", "20261121-000000-bbbbbb")); !os.IsNotExist(err) {
		t.Errorf("the ended session's logs were kept: %v", err)
	}
}

// TestTwoResumesOfOneSessionAtOnce (F6): two processes resume one
// session at the same moment. Both pass Load's check (nobody holds it
// yet); exactly one may go on, and the other is refused before it writes
// anything under the session, saying who has it. A resume after the
// winner ended, and one after the holder died, still work.
func TestTwoResumesOfOneSessionAtOnce(t *testing.T) { suite(t, testTwoResumes) }

func testTwoResumes(t *testing.T, connect func(*testing.T) *journal.DB) {
	dir := t.TempDir()
	// A session its process left open when it died.
	const id = "20261125-090000-f6f6f6"
	store := connect(t)
	j := journal.New(store, journal.Options{})
	dead := journal.Host{ID: "dead", Hostname: hostname(t), PID: 1 << 22, Start: 1, Started: time.Now()}
	j.Add(&dead)
	log := j.StartSession(journal.Session{ID: id, HostID: dead.ID, Surface: "run", Started: time.Now()}, 0)
	log.Message([]byte(`{"role":"user","content":[{"type":"text","text":"first"}]}`))
	log.Message([]byte(`{"role":"assistant","content":[{"type":"text","text":"ok"}]}`))
	if err := j.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	store.Close()

	// Two processes start together; the barrier holds both between Load
	// and Record, so both have passed the check when they take it.
	recs := []*journal.Recorder{recorderOn(t, connect(t), dir), recorderOn(t, connect(t), dir)}
	var (
		barrier sync.WaitGroup
		wg      sync.WaitGroup
		errs    = make([]error, 2)
		records = make([]agent.Record, 2)
		cfgs    = make([]agent.Config, 2)
	)
	barrier.Add(2)
	for i, rec := range recs {
		wg.Go(func() {
			res, err := rec.Load(t.Context(), id)
			barrier.Done()
			if err != nil {
				errs[i] = err
				return
			}
			barrier.Wait()
			records[i], errs[i] = rec.Record(t.Context(), agent.SessionInfo{ID: id, Surface: "run", Resume: res}, &cfgs[i])
		})
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("two resumes at once: %v and %v, want exactly one refused", errs[0], errs[1])
	}
	won, lost := 0, 1
	if errs[0] != nil {
		won, lost = 1, 0
	}
	want := fmt.Sprintf("session %s was resumed by another offstage (pid %d) just now; end it first", id, os.Getpid())
	if errs[lost].Error() != want {
		t.Errorf("the loser's error = %q, want %q", errs[lost], want)
	}
	if cfgs[lost].OnMessage != nil || cfgs[lost].Tasks.Recorder != nil {
		t.Error("the refused resume hooked its session up to the journal")
	}
	sess, err := recs[won].Store().Session(t.Context(), id)
	if err != nil || sess.HostID != recs[won].Host().ID || !sess.Ended.IsZero() {
		t.Errorf("the session after the race = %+v, %v; want it open and held by the winner %s", sess, err, recs[won].Host().ID)
	}

	// The winner goes on: its messages number on after the old ones.
	cfgs[won].OnMessage(provider.Message{Role: provider.User, Content: []provider.Block{{Type: provider.Text, Text: "second"}}})
	// Neither process may resume it again while the winner has it open.
	for _, rec := range recs {
		if _, err := rec.Load(t.Context(), id); err == nil || !strings.Contains(err.Error(), "end it first") {
			t.Errorf("resuming an open session = %v, want it refused", err)
		}
	}
	records[won].End()
	if err := recs[won].Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := recs[lost].Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	// After the winner ended, a process resumes it as usual: the
	// conversation is whole and in order.
	rec := recorderOn(t, connect(t), dir)
	defer rec.Close(context.Background())
	res, err := rec.Load(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.History) != 3 || res.Seq != 3 || res.History[2].TextOf() != "second" {
		t.Fatalf("resumed after the winner ended: %d messages (seq %d): %+v", len(res.History), res.Seq, res.History)
	}
	var cfg agent.Config
	r, err := rec.Record(t.Context(), agent.SessionInfo{ID: id, Surface: "run", Resume: res}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.End()

	// A Resume made by hand (no Claim from Load), of a session the
	// journal does not hold yet, from two processes at once: one records
	// it, the other is refused.
	other := recorderOn(t, connect(t), dir)
	defer other.Close(context.Background())
	const fresh = "20261125-091500-0f0f0f"
	start := make(chan struct{})
	for i, rec := range []*journal.Recorder{rec, other} {
		wg.Go(func() {
			<-start
			var cfg agent.Config
			records[i], errs[i] = rec.Record(t.Context(), agent.SessionInfo{ID: fresh, Surface: "embed", Resume: &agent.Resume{}}, &cfg)
		})
	}
	close(start)
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("two hand-made resumes of a new session at once: %v and %v, want exactly one refused", errs[0], errs[1])
	}
	for i, r := range records {
		if errs[i] == nil {
			r.End()
		} else if !strings.Contains(errs[i].Error(), "was resumed by another offstage (pid") && !strings.Contains(errs[i].Error(), "is still running in another offstage") {
			t.Errorf("the refused hand-made resume: %v", errs[i])
		}
	}
}

// TestOneProcessResumesASessionOnceAtATime: within one process the same
// holds: of two resumes of one session at once, one goes on; once it
// ends, the process may resume the session again.
func TestOneProcessResumesASessionOnceAtATime(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder(t, dir, journal.RecorderOptions{})
	defer rec.Close(context.Background())
	var cfg agent.Config
	first, err := rec.Record(t.Context(), agent.SessionInfo{Surface: "embed"}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnMessage(provider.Message{Role: provider.User, Content: []provider.Block{{Type: provider.Text, Text: "hello"}}})
	id := first.ID()
	if _, err := rec.Load(t.Context(), id); err == nil || !strings.Contains(err.Error(), "open in this offstage already") {
		t.Errorf("resuming a session this process has open = %v, want it refused", err)
	}
	first.End() // queued: Load writes it before it reads

	var wg sync.WaitGroup
	errs := make([]error, 2)
	records := make([]agent.Record, 2)
	loaded := make([]*agent.Resume, 2)
	for i := range loaded {
		if loaded[i], err = rec.Load(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if len(loaded[i].History) != 1 {
			t.Fatalf("loaded %d messages, want the one recorded", len(loaded[i].History))
		}
	}
	for i := range loaded {
		wg.Go(func() {
			var cfg agent.Config
			records[i], errs[i] = rec.Record(t.Context(), agent.SessionInfo{ID: id, Resume: loaded[i]}, &cfg)
		})
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("two resumes at once in one process: %v and %v, want exactly one refused", errs[0], errs[1])
	}
	for i, r := range records {
		if r != nil {
			r.End()
		} else if !strings.Contains(errs[i].Error(), "open in this offstage already") && !strings.Contains(errs[i].Error(), "changed while this offstage was resuming it") {
			t.Errorf("the refused resume: %v", errs[i])
		}
	}
	res, err := rec.Load(t.Context(), id)
	if err != nil {
		t.Fatalf("resuming again after the resume ended: %v", err)
	}
	var cfg2 agent.Config
	r, err := rec.Record(t.Context(), agent.SessionInfo{ID: id, Resume: res}, &cfg2)
	if err != nil {
		t.Fatal(err)
	}
	r.End()
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s, err := rec.Store().Session(t.Context(), id); err != nil || s.Ended.IsZero() {
		t.Errorf("the session after its last end = %+v, %v; want it ended", s, err)
	}
}

// recorderOn opens a Recorder on store as a process would at its start.
func recorderOn(t *testing.T, store *journal.DB, dir string) *journal.Recorder {
	t.Helper()
	rec, err := journal.NewRecorder(t.Context(), store, journal.RecorderOptions{LogDir: filepath.Join(dir, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestTheJournalKeepsWhatAShellUsed (issue 22): a shell's CPU time and
// peak memory at its end reach the journal, as offstage tasks show gives
// them.
func TestTheJournalKeepsWhatAShellUsed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("usage is measured from /proc")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	dir, work := t.TempDir(), t.TempDir()
	// 64 MiB held above this process's own peak (a shell's peak at or
	// below it cannot be told from the one Linux carries into it at exec,
	// and is left out), and a busy loop of some 200 ms.
	var self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		t.Fatal(err)
	}
	hold := self.Maxrss<<10 + 64<<20
	burn := `python3 -c 'import time; b = bytearray(` + strconv.FormatInt(hold, 10) + `); t = time.process_time(); exec("while time.process_time() - t < 0.2: pass")'`
	model := scriptedModel(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "`+strings.ReplaceAll(burn, `"`, `\"`)+`"}}]},
		{"text": "Done."}
	]}`)
	cfg := agent.Config{Model: model, Tools: tools.Config{Process: proc.Config{Dir: work}}}
	rec := newRecorder(t, dir, journal.RecorderOptions{})
	defer rec.Close(context.Background())
	s, err := agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Turn(t.Context(), "burn", agent.Discard); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	tasks, err := rec.Store().Tasks(t.Context(), journal.TaskFilter{Session: s.ID()})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks = %+v, %v", tasks, err)
	}
	got := tasks[0]
	t.Logf("%s: CPU %v, peak %d MiB (%s)", got.State, got.CPU, got.MemoryPeak>>20, proc.Containment().Mode)
	if got.State != "completed" || got.CPU < 150*time.Millisecond || got.MemoryPeak < hold || got.MemoryPeak > hold+1<<30 {
		t.Errorf("shell:1 kept CPU %v, peak memory %d; want at least 150ms and the %d bytes held", got.CPU, got.MemoryPeak, hold)
	}
}

// TestTheJournalKeepsAShellsSandbox: each shell's sandbox is recorded
// with it; a shell without one records none.
func TestTheJournalKeepsAShellsSandbox(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.ReadOnly}); err != nil {
		t.Skipf("no sandbox on this host: %v", err)
	}
	model := scriptedModel(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo fenced"}}, {"name": "bash", "input": {"command": "echo free", "sandbox": false}}]},
		{"text": "Done."}
	]}`)
	allow := func(context.Context, string, string) error { return nil }
	cfg := agent.Config{Model: model, Tools: tools.Config{Process: proc.Config{Dir: work, Sandbox: sandbox.Policy{Mode: sandbox.ReadOnly}}, Escalate: allow}}
	rec := newRecorder(t, dir, journal.RecorderOptions{})
	defer rec.Close(context.Background())
	s, err := agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	tasks, err := rec.Store().Tasks(t.Context(), journal.TaskFilter{Session: s.ID()})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("tasks = %+v, %v", tasks, err)
	}
	got := map[string]string{}
	for _, tk := range tasks {
		got[tk.Label] = tk.Sandbox
	}
	if !strings.HasPrefix(got["echo fenced"], "read-only; writes only under: ") || got["echo free"] != "" {
		t.Errorf("sandboxes kept: %q", got)
	}
}

// TestTheJournalKeepsAShellsPorts (issue 40 item 3): the TCP ports
// leased for a shell (bash with port) are recorded with it, on every
// backend, as offstage tasks show and the dashboard give them; a shell
// that leased none records none.
func TestTheJournalKeepsAShellsPorts(t *testing.T) { suite(t, testPorts) }

func testPorts(t *testing.T, connect func(*testing.T) *journal.DB) {
	dir, work := t.TempDir(), t.TempDir()
	model := scriptedModel(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo port=$PORT", "port": 2}}, {"name": "bash", "input": {"command": "echo none"}}]},
		{"text": "Done."}
	]}`)
	cfg := agent.Config{Model: model, Tools: tools.Config{Process: proc.Config{Dir: work}, Ports: &tools.PortLeases{Dir: t.TempDir()}}}
	rec := recorderOn(t, connect(t), dir)
	defer rec.Close(context.Background())
	s, err := agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	tasks, err := rec.Store().Tasks(t.Context(), journal.TaskFilter{Session: s.ID()})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("tasks = %+v, %v", tasks, err)
	}
	got := map[string][]int{}
	for _, tk := range tasks {
		got[tk.Label] = tk.Ports
	}
	leased := got["echo port=$PORT"]
	if len(leased) != 2 || leased[0] == leased[1] || leased[0] < 20000 || leased[0] >= 30000 || got["echo none"] != nil {
		t.Fatalf("ports kept: %v", got)
	}
	one, err := rec.Store().Task(t.Context(), s.ID(), tasks[0].ID)
	if err != nil || (tasks[0].Label == "echo port=$PORT") != (len(one.Ports) == 2) {
		t.Errorf("Task(%s) = ports %v, %v; want what Tasks gave", tasks[0].ID, one.Ports, err)
	}
}
