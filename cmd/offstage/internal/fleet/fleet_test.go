package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/pgtest"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

// helperEnv makes the test binary a child that says when SIGTERM
// reaches it.
const helperEnv = "OFFSTAGE_FLEET_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		fmt.Println("ready")
		<-term
		fmt.Println("term")
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestLastLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		cut  bool
		want string
	}{
		{"a\nb\nc\n", 2, false, "b\nc\n"},
		{"a\nb\nc", 2, false, "b\nc"},
		{"a\nb\n", 5, false, "a\nb\n"},
		{"art of a line\nb\nc\n", 5, true, "b\nc\n"},
		{"", 3, false, ""},
	} {
		if got := c.in[lastLines([]byte(c.in), c.n, c.cut):]; got != c.want {
			t.Errorf("last %d lines of %q = %q, want %q", c.n, c.in, got, c.want)
		}
	}
}

type owner struct{ secret string }

func (o owner) PeerSecret() string                       { return o.secret }
func (owner) Shell(string, string) (*proc.Process, bool) { return nil, false }
func (owner) Store() *journal.DB                         { return nil }
func (owner) Host() journal.Host                         { return journal.Host{} }
func (owner) LogDir() string                             { return "" }

// TestPeersShowTheSecret: the owner serves output only to a request that
// shows its secret.
func TestPeersShowTheSecret(t *testing.T) {
	h := Handler(owner{secret: "s3cret"})
	for _, auth := range []string{"", "Bearer wrong", "Bearer ", "s3cret", "Bearer s3cre"} {
		r := httptest.NewRequest(http.MethodGet, OutputPath+"?session=x&id=shell:1", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, w.Code)
		}
	}
}

// TestAMissedDoorbellIsCaughtUp: a request whose owner heard nothing of
// it (no doorbell: it was not listening) is acted on all the same, from
// the record, at the owner's next catch-up; the task's owner is told an
// operator stopped it; a request for a session its host no longer has
// open says so.
func TestAMissedDoorbellIsCaughtUp(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "journal.db")
	store, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{}) // no BellDir
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	s, err := agent.Open(ctx, agent.Config{}, agent.Surface{Name: "test", Journal: rec})
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Table().View("").Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, _ *task.Handle) (string, error) {
		<-ctx.Done()
		return "", context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.Flush(ctx)
	other, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	got, err := Cancel(ctx, other, s.ID(), id, "ops@elsewhere", "caught up")
	if err != nil || got.State != journal.Canceled {
		t.Fatalf("Cancel = %+v, %v", got, err)
	}
	r, ok, _ := s.Table().Result(id)
	var op *journal.OperatorCancel
	if !ok || !errors.As(r.Err, &op) || op.By != "ops@elsewhere" || op.Reason != "caught up" || !errors.Is(r.Err, task.ErrCanceled) {
		t.Errorf("the task's owner is told %v", r.Err)
	}
	if got.Error != r.Err.Error() {
		t.Errorf("the record says %q, want %q", got.Error, r.Err)
	}
	// A session the journal has open on this host, which this process
	// does not have open (its record was left by a crash, say): the owner
	// says it cannot stop it.
	now := time.Now()
	if err := other.Write(ctx, []journal.Record{
		&journal.Session{ID: "ghost", HostID: rec.Host().ID, Surface: "test", Started: now},
		&journal.TaskChange{Session: "ghost", Change: task.Change{Event: task.Event{Time: now, Type: task.EventSpawned, ID: "shell:9", Kind: "shell", State: task.Running}}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := Cancel(ctx, other, "ghost", "shell:9", "ops", ""); !errors.Is(err, ErrNotHere) {
		t.Errorf("Cancel of a task of a session not open in its host = %v, want ErrNotHere", err)
	}
	s.Close(ctx)
}

// TestTheOwnerServesOnlyItsOwnLogs: an ended shell's log is served from
// the owner's log directory; a log path written into the journal by hand
// (whoever can write the journal can) never makes the owner serve another
// file, nor a task of another host's session.
func TestTheOwnerServesOnlyItsOwnLogs(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{LogDir: logs})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	own := filepath.Join(logs, "mine", "shell-1.log")
	secret := filepath.Join(dir, "secret.txt")
	os.MkdirAll(filepath.Dir(own), 0o700)
	os.WriteFile(own, []byte("one\ntwo\n"), 0o600)
	os.WriteFile(secret, []byte("not for peers\n"), 0o600)
	link := filepath.Join(logs, "mine", "shell-3.log") // in the log directory, pointing out
	os.Symlink(secret, link)
	now := time.Now()
	var records []journal.Record
	for _, x := range []struct{ session, host, id, log string }{
		{"mine", rec.Host().ID, "shell:1", own},
		{"mine", rec.Host().ID, "shell:2", secret},
		{"mine", rec.Host().ID, "shell:3", link},
		{"mine", rec.Host().ID, "shell:4", "/etc/shadow"},
		{"theirs", "another-host", "shell:1", own},
	} {
		if x.id == "shell:1" {
			records = append(records, &journal.Session{ID: x.session, HostID: x.host, Surface: "test", Started: now})
		}
		records = append(records,
			&journal.TaskChange{Session: x.session, Change: task.Change{Event: task.Event{Time: now, Type: task.EventSpawned, ID: x.id, Kind: "shell", State: task.Completed}}},
			journal.TaskProcess{Session: x.session, ID: x.id, LogPath: x.log})
	}
	if err := store.Write(ctx, records); err != nil {
		t.Fatal(err)
	}
	h := Handler(rec)
	for _, c := range []struct {
		session, id string
		code        int
		body        string
	}{
		{"mine", "shell:1", 200, "one\ntwo\n"},
		{"mine", "shell:2", 404, ""},
		{"mine", "shell:3", 404, ""},
		{"mine", "shell:4", 404, ""},
		{"theirs", "shell:1", 404, ""},
	} {
		r := httptest.NewRequest(http.MethodGet, OutputPath+"?since=0&session="+c.session+"&id="+c.id, nil)
		r.Header.Set("Authorization", "Bearer "+rec.PeerSecret())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code || (c.code == 200 && w.Body.String() != c.body) || strings.Contains(w.Body.String(), "not for peers") {
			t.Errorf("%s/%s: %d %q, want %d %q", c.session, c.id, w.Code, w.Body.String(), c.code, c.body)
		}
	}
}

// TestAMissedNotificationIsCaughtUp: in PostgreSQL, a request written
// without NOTIFY (an older offstage, a notification lost with a
// connection) is acted on from the record at the owner's catch-up; once
// the server went away and came back, the owner listens again.
func TestAMissedNotificationIsCaughtUp(t *testing.T) {
	ctx := t.Context()
	srv := pgtest.Start(t)
	url := srv.NewDatabase(t)
	store, err := journal.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	again := make(chan struct{}, 1)
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{Report: func(msg string) {
		if strings.Contains(msg, "listening for cancel requests again") {
			select {
			case again <- struct{}{}:
			default:
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	s, err := agent.Open(ctx, agent.Config{}, agent.Surface{Name: "test", Journal: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	id, err := s.Table().View("").Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, _ *task.Handle) (string, error) {
		<-ctx.Done()
		return "", context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `INSERT INTO cancels (session_id, id, requested_at, requested_by, reason) VALUES ($1, $2, $3, 'ops', 'unannounced')`, s.ID(), id, time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	done, _ := s.Table().Done(id)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the task still runs 20 s after a request its owner was not told of")
	}
	r, _, _ := s.Table().Result(id)
	if !strings.Contains(fmt.Sprint(r.Err), "unannounced") {
		t.Errorf("the task ended with %v", r.Err)
	}
	conn.Close(ctx)

	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-again:
	case <-time.After(30 * time.Second):
		t.Fatal("the owner does not listen again 30 s after the server came back")
	}
	id2, err := s.Table().View("").Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, _ *task.Handle) (string, error) {
		<-ctx.Done()
		return "", context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.Flush(ctx)
	other, err := journal.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := Cancel(ctx, other, s.ID(), id2, "ops", "after the restart"); err != nil {
		t.Fatal(err)
	}
	q, _ := other.CancelRequest(ctx, s.ID(), id2)
	t.Logf("after the server came back, a request was acted on in %s", q.Handled.Sub(q.Requested))
}

// lineWriter hands over what Follow writes, line by line.
type lineWriter struct{ lines chan string }

func (w lineWriter) Write(b []byte) (int, error) {
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" {
			w.lines <- l
		}
	}
	return len(b), nil
}

// TestFollowReadsALocalLogUntilTheTaskEnds: the owner is alive on this
// machine and serves no peers (offstage run): Follow prints the log's
// last lines, then what is appended, and ends once the journal records
// the task's end and its last lines are printed.
func TestFollowReadsALocalLogUntilTheTaskEnds(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	log := filepath.Join(dir, "logs", "s", "shell-1.log")
	os.MkdirAll(filepath.Dir(log), 0o700)
	os.WriteFile(log, []byte("a\nb\nc\n"), 0o600)
	now := time.Now()
	if err := store.Write(ctx, []journal.Record{
		&journal.Session{ID: "s", HostID: rec.Host().ID, Surface: "run", Started: now},
		&journal.TaskChange{Session: "s", Change: task.Change{Event: task.Event{Time: now, Type: task.EventSpawned, ID: "shell:1", Kind: "shell", State: task.Running}}},
		journal.TaskProcess{Session: "s", ID: "shell:1", LogPath: log},
	}); err != nil {
		t.Fatal(err)
	}
	w := lineWriter{make(chan string, 100)}
	done := make(chan error, 1)
	go func() { done <- Follow(ctx, store, "s", "shell:1", FollowOptions{Since: -1, Lines: 2}, w) }()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-w.lines:
			if got != want {
				t.Fatalf("followed %q, want %q", got, want)
			}
		case err := <-done:
			t.Fatalf("Follow ended early: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q in 10 s", want)
		}
	}
	next("b\n")
	next("c\n")
	f, _ := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("d\n")
	next("d\n")
	f.WriteString("e\n")
	f.Close()
	if err := store.Write(ctx, []journal.Record{
		&journal.TaskChange{Session: "s", Change: task.Change{Event: task.Event{Time: time.Now(), Type: task.EventFinished, ID: "shell:1", Kind: "shell", State: task.Completed}}},
	}); err != nil {
		t.Fatal(err)
	}
	next("e\n")
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Follow = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow goes on 10 s after the task ended")
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"http://127.0.0.1:7777": true, "http://[::1]:1": true, "http://localhost:80": true,
		"http://web-2:7777": false, "http://10.0.0.2:7777": false, "": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestFollowSaysWhereALogOfAnotherMachineIs: a task of another machine
// whose offstage cannot serve it (gone, or serving no peers) is not read
// here: the error names the machine and the file.
func TestFollowSaysWhereALogOfAnotherMachineIs(t *testing.T) {
	ctx := t.Context()
	store, err := journal.OpenSQLite(filepath.Join(t.TempDir(), "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now()
	for i, lease := range []time.Time{{}, now.Add(-time.Minute)} { // serving no peers; gone
		host, session := fmt.Sprint("h", i), fmt.Sprint("s", i)
		if err := store.Write(ctx, []journal.Record{
			&journal.Host{ID: host, Hostname: "elsewhere.example", PID: 4242, Start: 1, Started: now, Lease: lease},
			&journal.Session{ID: session, HostID: host, Surface: "mcp", Started: now},
			&journal.TaskChange{Session: session, Change: task.Change{Event: task.Event{Time: now, Type: task.EventSpawned, ID: "shell:1", Kind: "shell", State: task.Running}}},
			journal.TaskProcess{Session: session, ID: "shell:1", PID: 4243, LogPath: "/var/lib/offstage/logs/" + session + "/shell-1.log"},
		}); err != nil {
			t.Fatal(err)
		}
		err := Follow(ctx, store, session, "shell:1", FollowOptions{Since: -1}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "/var/lib/offstage/logs/"+session+"/shell-1.log on elsewhere.example") {
			t.Errorf("Follow of another machine's task = %v, want the machine and the file named", err)
		}
		if !errors.As(err, new(LogError)) {
			t.Errorf("Follow of another machine's task = %T, want a LogError (the log's trouble, not the journal's)", err)
		}
	}
	// A task whose offstage kept no log: said so, as the task's trouble.
	host, _ := os.Hostname()
	if err := store.Write(ctx, []journal.Record{
		&journal.Host{ID: "h9", Hostname: host, PID: 4244, Start: 1, Started: now},
		&journal.Session{ID: "s9", HostID: "h9", Surface: "mcp", Started: now},
		&journal.TaskChange{Session: "s9", Change: task.Change{Event: task.Event{Time: now, Type: task.EventSpawned, ID: "shell:1", Kind: "shell", State: task.Running}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := Follow(ctx, store, "s9", "shell:1", FollowOptions{Since: -1}, io.Discard); !errors.As(err, new(LogError)) || !strings.Contains(err.Error(), "no output log") {
		t.Errorf("Follow of a task without a log = %v, want a LogError saying so", err)
	}
}
