package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/tools"
)

const mcpUsage = `Usage: offstage mcp [flags]

Serves offstage's tools over the Model Context Protocol: bash, task_list,
task_inspect, task_output, task_wait, task_cancel, task_input, and
spawn_agent when a model is configured (same flags and environment as
"offstage run"). On stdio by default; with --http, over the streamable HTTP
transport, which needs a bearer token (OFFSTAGE_MCP_TOKEN, or one generated
and printed to stderr) and listens on loopback unless --allow-remote.

Each MCP session sees only its own tasks; when it ends, they are cancelled
and every process is reaped (unless --keep-on-disconnect). Logs go to
stderr or --log, never stdout.`

const mcpExamples = `  offstage mcp
  offstage mcp --dir ~/src/project
  OPENAI_API_KEY=sk-... offstage mcp            # with spawn_agent
  OFFSTAGE_MCP_TOKEN=s3cret offstage mcp --http 127.0.0.1:7777

  In an MCP client's configuration (Claude Desktop, Cursor, …):
    {"mcpServers": {"offstage": {"command": "offstage", "args": ["mcp", "--dir", "/path/to/project"]}}}
`

func mcpCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	var mf modelFlags
	mf.register(fs, "for spawn_agent; none unless a key is set")
	dir := fs.String("dir", "", "working directory of the shells (default: the current one)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on this address instead of stdio (loopback unless --allow-remote)")
	allowRemote := fs.Bool("allow-remote", false, "with --http: allow listening on a non-loopback address")
	origins := fs.String("allow-origin", "", "with --http: comma-separated extra allowed Origin values, besides loopback")
	keep := fs.Bool("keep-on-disconnect", false, "keep a session's tasks running after it ends (until offstage exits)")
	logPath := fs.String("log", "", "write logs to this file instead of stderr")
	var af agentFlags
	af.register(fs, true)
	var jf journalFlags
	jf.register(fs)
	rest, err := parse(fs, args, mcpUsage, mcpExamples, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("mcp takes no arguments (got %q)", rest[0])
	}
	logger, closeLog, err := openLog(*logPath, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	if err := logContainment(logger); err != nil {
		return err
	}

	var model provider.Model
	if mf != (modelFlags{}) || os.Getenv("OPENAI_API_KEY") != "" || os.Getenv("ANTHROPIC_API_KEY") != "" {
		if model, err = newModel(mf, os.Getenv); err != nil {
			return err
		}
	}
	if *dir, err = workDir(*dir); err != nil {
		return err
	}

	ctx, cancel := cancelOnInterrupt(ctx)
	defer cancel()
	rec, err := openRecorder(ctx, jf, stderr)
	if err != nil {
		return err
	}
	defer rec.close()
	var profiles []agent.Profile
	var instructions string
	if model != nil {
		profiles, instructions = af.profiles(*dir, mf, stderr), af.instructions(*dir, stderr)
	}
	svc := mcpserver.New(ctx, mcpserver.Config{
		Tools:               tools.Config{Process: proc.Config{Dir: *dir}},
		Model:               model,
		Profiles:            profiles,
		ProjectInstructions: instructions,
		KeepOnDisconnect:    *keep,
		Record:              rec.hook(mf.describe(os.Getenv)),
		Logger:              logger,
		Version:             version(),
	})
	defer func() {
		closeCtx, cancelClose := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancelClose()
		if err := svc.Close(closeCtx); err != nil {
			logger.Error("closing", "err", err)
		}
	}()
	if *httpAddr == "" {
		logger.Info("serving MCP on stdio", "dir", *dir, "spawn_agent", model != nil)
		err := svc.Server().Run(ctx, mcpserver.Stdio(stdin, stdout))
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			logger.Info("session ended", "err", err)
		}
		return nil
	}
	return serveHTTP(ctx, svc, *httpAddr, *allowRemote, *origins, stderr, logger)
}

func serveHTTP(ctx context.Context, svc *mcpserver.Service, addr string, allowRemote bool, origins string, stderr io.Writer, logger *slog.Logger) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--http %q is not host:port (%v)", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !allowRemote && !isLoopback(host) {
		return usagef("--http %s would accept connections from other machines: this runs commands, so pass --allow-remote if you mean it", addr)
	}
	token := os.Getenv("OFFSTAGE_MCP_TOKEN")
	if token == "" {
		b := make([]byte, 24)
		rand.Read(b)
		token = hex.EncodeToString(b)
	}
	var allowed []string
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, strings.TrimSuffix(o, "/"))
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return usagef("cannot listen on %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", svc.HTTPHandler(token, allowed))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "offstage mcp: listening on http://%s/mcp\noffstage mcp: send \"Authorization: Bearer %s\"\n", ln.Addr(), token)
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(ln) }()
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shutdown)
	logger.Info("stopped serving HTTP")
	return nil
}

// openLog returns the logger of a server command: to path, or to stderr
// when path is empty; never stdout, which is the protocol.
func openLog(path string, stderr io.Writer) (*slog.Logger, func(), error) {
	out, closeLog := stderr, func() {}
	if path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, usagef("cannot open the log file: %v", err)
		}
		out, closeLog = f, func() { f.Close() }
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo})), closeLog, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// logContainment says at start-up how shells are contained (a cgroup per
// task, or the marks, and why), and fails when OFFSTAGE_CONTAINMENT asks
// for one that cannot be had.
func logContainment(logger *slog.Logger) error {
	c := proc.Containment()
	if c.Err != nil {
		return c.Err
	}
	logger.Info("containment", "mode", c.Mode, "dir", c.Dir, "reason", c.Reason)
	return nil
}
