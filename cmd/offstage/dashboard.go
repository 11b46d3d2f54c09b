package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/offstage/offstage/cmd/offstage/internal/dashboard"
	"github.com/offstage/offstage/cmd/offstage/internal/fleet"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/mcpserver"
)

const dashboardUsage = `Usage: offstage dashboard [flags]

Serves the live dashboard of a journal's tasks (the page offstage mcp --http
serves at /ui) without running a server of sessions: for a shared journal's
fleet (--journal or $OFFSTAGE_JOURNAL_URL), or this machine's. The list
follows the journal live, filtered by state, instance, session and age; a
task's page follows its output through the instance that runs it (as
offstage tasks follow does), and its stop button does what offstage tasks
cancel does. It only reads the journal, but to record a stop request. Open the address it prints and log in with the token
(OFFSTAGE_MCP_TOKEN, or one generated and printed); it listens on loopback
unless --allow-remote.`

const dashboardExamples = `  offstage dashboard                        # http://127.0.0.1:7778/ui/
  OFFSTAGE_JOURNAL_URL=postgres://offstage@db/offstage offstage dashboard --http 127.0.0.1:8080
`

func dashboardCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	var jf journalFlags
	fs.StringVar(&jf.state, "state-dir", "", "directory of the journal (default $XDG_STATE_HOME/offstage, or ~/.local/state/offstage)")
	jf.registerShared(fs)
	addr := fs.String("http", "127.0.0.1:7778", "serve on this address (loopback unless --allow-remote)")
	allowRemote := fs.Bool("allow-remote", false, "allow listening on a non-loopback address")
	origins := fs.String("allow-origin", "", "comma-separated extra allowed Origin values, besides loopback and the page's own")
	rest, err := parse(fs, args, dashboardUsage, dashboardExamples, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("dashboard takes no arguments (got %q)", rest[0])
	}
	dir, err := jf.dir(os.Getenv)
	if err != nil {
		return err
	}
	if jf.sharedURL(os.Getenv) == "" {
		if path := filepath.Join(dir, "journal.db"); missing(path) {
			return usagef("no journal at %s yet: it is made by the first offstage run, mcp or acp (or pass --state-dir, or --journal for a shared one)", path)
		}
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return usagef("--http %q is not host:port (%v)", *addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !*allowRemote && !isLoopback(host) {
		return usagef("--http %s would accept connections from other machines: pass --allow-remote if you mean it", *addr)
	}
	store, err := jf.openReading(ctx, dir)
	if err != nil {
		return err
	}
	defer store.Close()
	token, generated, err := dashboardToken()
	if err != nil {
		return err
	}
	ctx, stop := cancelOnInterrupt(ctx)
	defer stop()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return usagef("cannot listen on %s: %v", *addr, err)
	}
	mux := http.NewServeMux()
	writable := func(ctx context.Context) (journal.Store, func(), error) {
		w, err := jf.open(ctx, dir) // a cancel request is written
		if err != nil {
			return nil, nil, err
		}
		return w, func() { w.Close() }, nil
	}
	dash := mountDashboard(ctx, mux, store, writable, token, splitOrigins(*origins))
	defer dash.Close()
	srv := &http.Server{Handler: mcpserver.BoundBodies(mux), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleConn} // every body bounded
	fmt.Fprintf(stderr, "offstage dashboard: serving %s on http://%s/ui/\n", describeJournal(store), ln.Addr())
	if generated {
		fmt.Fprintf(stderr, "offstage dashboard: log in with the token %s\n", token)
	} else {
		warnShortToken(stderr, "dashboard", token, "stops tasks here")
		fmt.Fprintln(stderr, "offstage dashboard: log in with $OFFSTAGE_MCP_TOKEN (the token it was given)")
	}
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(ln) }()
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	stop()
	dash.Close() // ends the event streams, which Shutdown would wait for
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// taskCost prices an agent task at its session's model's price in ps, as
// offstage tasks show does; nil if ps is empty.
func taskCost(store journal.Store, ps prices) func(context.Context, journal.Task) (float64, bool) {
	if len(ps) == 0 {
		return nil
	}
	return func(ctx context.Context, t journal.Task) (float64, bool) {
		s, err := store.Session(ctx, t.Session)
		if err != nil {
			return 0, false
		}
		return ps.cost(s.Model, t.Usage)
	}
}

// dashboardToken is OFFSTAGE_MCP_TOKEN, or a new random one (generated).
// A token no client can send back is refused (checkToken).
func dashboardToken() (token string, generated bool, err error) {
	if t := os.Getenv("OFFSTAGE_MCP_TOKEN"); t != "" {
		return t, false, checkToken(t)
	}
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b), true, nil
}

// checkToken refuses a token no client's Authorization header could
// carry, so that every request got 401 while offstage started as if all
// were well (an outsider's finding): one that begins or ends with white
// space (a newline that $(cat file) kept: HTTP trims a header's value),
// or holds a control character (a line break inside).
func checkToken(token string) error {
	switch {
	case strings.TrimSpace(token) != token:
		return usagef("OFFSTAGE_MCP_TOKEN begins or ends with white space (a space, a newline), which no HTTP client can send back: set it without (OFFSTAGE_MCP_TOKEN=$(openssl rand -hex 24))")
	case strings.ContainsFunc(token, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
		return usagef("OFFSTAGE_MCP_TOKEN holds a control character (a line break, say), which no HTTP header can carry: set it to one line of letters and digits (OFFSTAGE_MCP_TOKEN=$(openssl rand -hex 24))")
	}
	return nil
}

// idleConn bounds how long an HTTP connection may wait, idle, for its
// next request: an outsider's keep-alive connections stayed open for
// good (a stream in progress is a request, not idle).
const idleConn = 2 * time.Minute

func describeJournal(store *journal.DB) string {
	if store.Dialect() == "postgres" {
		return "the shared journal"
	}
	return store.Path()
}

// splitOrigins reads --allow-origin.
func splitOrigins(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, strings.TrimSuffix(o, "/"))
		}
	}
	return out
}

// mountDashboard serves the dashboard of store at /ui/ on mux, behind
// token. Its stop button does what offstage tasks cancel does, through
// the journal writable opens (store itself for offstage mcp; opened for
// each request by offstage dashboard, which otherwise only reads), and a
// task's page follows its output as offstage tasks follow does, through
// the instance that runs it (package fleet).
func mountDashboard(ctx context.Context, mux *http.ServeMux, store journal.Store, writable func(context.Context) (journal.Store, func(), error), token string, allowed []string) *dashboard.Handler {
	dash := dashboard.New(ctx, dashboard.Options{Store: store, Token: token, AllowedOrigins: allowed,
		Cancel: func(ctx context.Context, session, id, by, reason string) (journal.Task, error) {
			w, done, err := writable(ctx)
			if err != nil {
				return journal.Task{}, err
			}
			defer done()
			return fleet.Cancel(ctx, w, session, id, by, reason)
		},
		Follow: func(ctx context.Context, session, id string, w io.Writer) error {
			return fleet.Follow(ctx, store, session, id, fleet.FollowOptions{Since: -1, Lines: 200}, w)
		},
		Cost: taskCost(store, userPrices()),
	})
	mux.Handle("/ui/", http.StripPrefix("/ui", dash))
	mux.Handle("/ui", http.RedirectHandler("/ui/", http.StatusSeeOther))
	return dash
}
