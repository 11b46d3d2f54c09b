// Package pgtest runs a private PostgreSQL server for tests: initdb into a
// temporary directory, a free port on the loopback, run as an unprivileged
// user when the tests run as root (the server refuses root), stopped and
// removed at the end of the test.
//
// Tests skip with one line when no PostgreSQL binaries are installed,
// unless OFFSTAGE_REQUIRE_POSTGRES is set (CI sets it), where they fail.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv makes a missing PostgreSQL a failure instead of a skip.
const RequireEnv = "OFFSTAGE_REQUIRE_POSTGRES"

// Server is a private PostgreSQL server.
type Server struct {
	URL  string // postgres://offstage@127.0.0.1:PORT/postgres?sslmode=disable
	bin  string
	dir  string
	data string
	port int
	cred *syscall.Credential
	cmd  *exec.Cmd
	exit chan error
}

// binDir finds the directory of initdb and postgres.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", ErrNoPostgres
	}
	sort.Strings(found)
	return filepath.Dir(found[len(found)-1]), nil
}

// Start runs a fresh server for the test and stops it at the end.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Run()
	if errors.Is(err, ErrNoPostgres) {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("PostgreSQL is required (%s is set): %v", RequireEnv, err)
		}
		t.Skipf("skipping: %v; apt-get install postgresql runs these tests", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// ErrNoPostgres says no PostgreSQL binaries are installed.
var ErrNoPostgres = errors.New("no PostgreSQL binaries (initdb) on PATH or in /usr/lib/postgresql/*/bin")

// Run runs a fresh server; Close stops and removes it.
func Run() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	parent := "" // $TMPDIR
	if os.Geteuid() == 0 {
		parent = "/tmp" // the server's user must reach it, whatever $TMPDIR is
	}
	dir, err := os.MkdirTemp(parent, "offstage-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if err := s.init(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the server and removes its files.
func (s *Server) Close() {
	s.Stop()
	os.RemoveAll(s.dir)
}

func (s *Server) init() error {
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			return fmt.Errorf("running as root, and no unprivileged user (postgres or nobody) to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
	}
	initdb := s.command("initdb", "-D", s.data, "-U", "offstage", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.URL = s.urlOf("postgres")
	return s.Start()
}

// Port returns the server's port, as text.
func (s *Server) Port() string { return strconv.Itoa(s.port) }

func (s *Server) urlOf(db string) string {
	return fmt.Sprintf("postgres://offstage@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

var databases atomic.Int64

// NewDatabase creates an empty database on the server and returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("offstage_%d", databases.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return s.urlOf(name)
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	return cmd
}

// Start starts the server (again, after Stop) on the same port and data,
// and waits until it accepts connections.
func (s *Server) Start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	s.cmd = s.command("postgres", "-D", s.data, "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=100")
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	s.exit = make(chan error, 1)
	go func(c *exec.Cmd, exit chan<- error) { exit <- c.Wait() }(s.cmd, s.exit)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case err := <-s.exit:
			b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			return fmt.Errorf("postgres exited (%v):\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres does not accept connections after 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the server down (fast shutdown: connections are cut) and
// waits for it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exit:
	case <-time.After(20 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exit
	}
	s.cmd = nil
}
