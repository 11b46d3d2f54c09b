package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/cmd/offstage/internal/dashboard"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "dashboard-test-token-0f3b7c9e"

// fleet is a journal with one session whose task table records into it,
// and a dashboard serving it at /ui/.
type fleet struct {
	dir     string
	store   *journal.DB
	j       *journal.Journal
	log     *journal.SessionLog
	table   *task.Table
	view    *task.View
	dash    *dashboard.Handler
	srv     *httptest.Server
	session string

	mu       sync.Mutex
	canceled []string // by the dashboard's Cancel
}

// newFleet opens it; withCancel gives the dashboard a Cancel that really
// cancels the task in its table.
func newFleet(t testing.TB, withCancel bool) *fleet {
	return newFleetEvery(t, withCancel, 100*time.Millisecond)
}

// newFleetEvery is newFleet with the dashboard reading the journal every
// interval (0: its default).
func newFleetEvery(t testing.TB, withCancel bool, interval time.Duration) *fleet {
	return newFleetWith(t, withCancel, func(o *dashboard.Options) { o.Interval = interval })
}

// newFleetWith is newFleet with the dashboard's options changed by opt.
func newFleetWith(t testing.TB, withCancel bool, opt func(*dashboard.Options)) *fleet {
	f := &fleet{dir: t.TempDir(), session: "20261125-test"}
	store, err := journal.OpenSQLite(filepath.Join(f.dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	f.store = store
	f.j = journal.New(store, journal.Options{})
	now := time.Now()
	f.j.Add(&journal.Host{ID: "host-1", Hostname: "test-host", PID: os.Getpid(), Started: now})
	f.log = f.j.StartSession(journal.Session{ID: f.session, HostID: "host-1", Surface: "mcp", Started: now}, 0)
	f.table = task.New(context.Background(), task.Options{Recorder: f.log})
	f.view = f.table.View("")
	opts := dashboard.Options{Store: store, Token: token, Interval: 100 * time.Millisecond}
	opt(&opts)
	if withCancel {
		opts.Cancel = func(ctx context.Context, session, id, by, reason string) (journal.Task, error) {
			if session != f.session {
				return journal.Task{}, fmt.Errorf("no session %s here", session)
			}
			// As the task's host does with the request (journal.Recorder).
			if already, err := f.table.CancelCause(id, &journal.OperatorCancel{By: by, Reason: reason}); err != nil || already {
				return journal.Task{}, fmt.Errorf("task %s: already finished %v, %v", id, already, err)
			}
			f.mu.Lock()
			f.canceled = append(f.canceled, id+" by "+by+": "+reason)
			f.mu.Unlock()
			if _, err := f.view.Wait(ctx, []string{id}, task.Any); err != nil {
				return journal.Task{}, err
			}
			if err := f.j.Flush(ctx); err != nil {
				return journal.Task{}, err
			}
			return store.Task(ctx, session, id)
		}
	}
	f.dash = dashboard.New(context.Background(), opts)
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", f.dash))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.close)
	return f
}

func (f *fleet) close() {
	f.srv.CloseClientConnections()
	f.dash.Close()
	f.srv.Close()
	f.srv.Client().CloseIdleConnections()
	f.table.Close(context.Background())
	f.j.Close(context.Background())
}

// ticker spawns a shell-like task that writes "line N" into its output
// log every every, until cancelled; it returns its id.
func (f *fleet) ticker(t testing.TB, label string, every time.Duration) string {
	t.Helper()
	ready := make(chan string, 1)
	id, err := f.view.Spawn(task.Spec{Kind: "shell", Label: label}, func(ctx context.Context, h *task.Handle) (string, error) {
		path := f.logPath(t, h.ID())
		out, err := os.Create(path)
		if err != nil {
			return "", err
		}
		defer out.Close()
		f.log.Process(h.ID(), 0, 0, path)
		ready <- path
		for i := 1; ; i++ {
			fmt.Fprintf(out, "line %d\n", i)
			h.OutputArrived(int64(i))
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(every):
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	<-ready
	return id
}

// logPath is where offstage would write task id's log: LOGS/SESSION/ID.log
// (journal.OpenLog reads no other); its directory is made.
func (f *fleet) logPath(t testing.TB, id string) string {
	dir := filepath.Join(f.dir, "logs", f.session)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Error(err)
	}
	return filepath.Join(dir, strings.ReplaceAll(id, ":", "-")+".log")
}
