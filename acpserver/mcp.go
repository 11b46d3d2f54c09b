package acpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// The editor's MCP servers (session/new's and session/load's mcpServers)
// are connected when the session opens, with the MCP go-sdk's client, and
// closed with it. Their tools reach the session's model as
// agent.Config.ExtraTools named mcp__SERVER__TOOL (Claude Code's
// convention) and run as offstage's own do: through the permission
// request and with a tool card.
//
// Designs rejected: connecting lazily at the first call (the model would
// not know the tools exist), and in the background after session/new
// answers (the first prompt's model request could come before the tools
// do, and the tool list of a conversation would change under the model).

const (
	// defaultMCPTimeout bounds how long one server may take to start and
	// list its tools (Config.MCPTimeout).
	defaultMCPTimeout = 30 * time.Second
	// mcpStopGrace is how long a stdio server has to exit once its input
	// closes, and again after SIGTERM, before SIGKILL (of every process
	// it started: it runs as a contained proc.Process).
	mcpStopGrace = 2 * time.Second
	// maxMCPTools bounds the tools a session takes from its MCP servers:
	// every tool costs the model context on every request.
	maxMCPTools = 200
	// mcpDescriptionBytes caps a remote tool's description (Claude Code's
	// cap, too).
	mcpDescriptionBytes = 2 << 10
	// maxToolName is the longest tool name every model API takes
	// (OpenAI's; the strictest of the providers offstage speaks).
	maxToolName = 64
	// stderrTail is how much of a stdio server's stderr is kept, to say
	// why it did not start. It also caps the rest of what its process
	// keeps in memory (proc.Config's HeadBytes, TailBytes, StreamBytes):
	// its stdout is the protocol, read as it comes, not kept.
	stderrTail = 2 << 10
)

// mcpServer is one connected MCP server of a session.
type mcpServer struct {
	name string
	cs   *mcp.ClientSession
	http *http.Transport // an HTTP server's connections; nil on stdio

	// A stdio server's; nil over HTTP.
	p          *proc.Process
	stdout     *io.PipeReader     // what the SDK reads: the process's stdout, as it comes
	stopWrites context.CancelFunc // makes a write to its input that blocks give up
}

// mcpStarted is what connecting a session's servers gave.
type mcpStarted struct {
	servers  []*mcpServer
	tools    []*tools.Tool
	problems []string // one sentence per server that failed or tool left out, for the user
}

// connectMCP starts the session's MCP servers at once, each within
// Config.MCPTimeout, and makes their tools. A server that fails is left
// out and said in problems; the others go on.
func (srv *server) connectMCP(ctx, abort context.Context, specs []acp.McpServer, cwd string) mcpStarted {
	type outcome struct {
		s     *mcpServer
		tools []*mcp.Tool
		err   error
	}
	outcomes := make([]outcome, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, srv.cfg.MCPTimeout)
			defer cancel()
			defer context.AfterFunc(abort, cancel)() // the request was cancelled: the start stops
			s, list, err := srv.connectOne(cctx, spec, cwd)
			outcomes[i] = outcome{s, list, err}
		})
	}
	wg.Wait()
	var started mcpStarted
	taken := make(map[string]string) // tool name → the server whose tool has it
	for i, o := range outcomes {
		name := serverName(specs[i])
		if o.err != nil {
			started.problems = append(started.problems, fmt.Sprintf("The MCP server %q was not started: %s. Its tools are not available in this session.", name, o.err))
			srv.cfg.Logger.Warn("MCP server not started", "server", name, "err", o.err)
			continue
		}
		started.servers = append(started.servers, o.s)
		var left []string
		for _, t := range o.tools {
			tool, err := srv.mcpTool(o.s, t)
			switch {
			case err != nil:
				left = append(left, fmt.Sprintf("%s (%v)", t.Name, err))
				continue
			case taken[tool.Name] != "":
				left = append(left, fmt.Sprintf("%s (its name, as %s, is taken by a tool of %q)", t.Name, tool.Name, taken[tool.Name]))
				continue
			case len(started.tools) >= maxMCPTools:
				left = append(left, fmt.Sprintf("%s (the session already has %d MCP tools, the most it takes)", t.Name, maxMCPTools))
				continue
			}
			taken[tool.Name] = name
			started.tools = append(started.tools, tool)
		}
		if len(left) > 0 {
			started.problems = append(started.problems, fmt.Sprintf("Of the MCP server %q, these tools are not available: %s.", name, text.Clip(strings.Join(left, "; "), 1<<10)))
		}
		srv.cfg.Logger.Info("MCP server connected", "server", name, "tools", len(o.tools))
	}
	return started
}

// serverName is the name the editor gave a server.
func serverName(spec acp.McpServer) string {
	switch {
	case spec.Stdio != nil:
		return spec.Stdio.Name
	case spec.Http != nil:
		return spec.Http.Name
	case spec.Sse != nil:
		return spec.Sse.Name
	case spec.Acp != nil:
		return spec.Acp.Name
	}
	return "(unnamed)"
}

// connectOne starts one server and lists its tools. On failure nothing of
// it is left running.
func (srv *server) connectOne(ctx context.Context, spec acp.McpServer, cwd string) (*mcpServer, []*mcp.Tool, error) {
	s := &mcpServer{name: serverName(spec)}
	var transport mcp.Transport
	switch {
	case spec.Stdio != nil:
		if spec.Stdio.Command == "" {
			return nil, nil, errors.New("its command is empty")
		}
		var err error
		if transport, err = srv.startStdio(ctx, s, spec.Stdio, cwd); err != nil {
			return nil, nil, err
		}
		// A server that has not answered when the time is up never became
		// one: it is killed at once, with all it started, rather than asked
		// to stop and waited for while the editor waits for session/new.
		// Its stdout then ends, and so does Connect.
		stop := context.AfterFunc(ctx, func() { s.p.Stop(0) })
		defer stop()
	case spec.Http != nil:
		s.http = http.DefaultTransport.(*http.Transport).Clone()
		transport = &mcp.StreamableClientTransport{Endpoint: spec.Http.Url, HTTPClient: headerClient(s.http, spec.Http.Url, spec.Http.Headers)}
	case spec.Sse != nil:
		s.http = http.DefaultTransport.(*http.Transport).Clone()
		transport = &mcp.SSEClientTransport{Endpoint: spec.Sse.Url, HTTPClient: headerClient(s.http, spec.Sse.Url, spec.Sse.Headers)}
	default:
		return nil, nil, errors.New("offstage connects stdio, HTTP and SSE servers only (agentCapabilities.mcpCapabilities says so)")
	}
	// No roots (deprecated in MCP; a stdio server runs in the session's
	// directory), no sampling, no elicitation: the client only calls.
	client := mcp.NewClient(&mcp.Implementation{Name: "offstage", Version: srv.cfg.Version},
		&mcp.ClientOptions{Logger: srv.cfg.Logger, Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		s.close() // Connect closed what it opened; this reaps what is left
		return nil, nil, s.startError(ctx, err)
	}
	s.cs = cs
	var list []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			s.close()
			return nil, nil, fmt.Errorf("listing its tools failed: %w", err)
		}
		list = append(list, t)
		if len(list) > maxMCPTools {
			break // connectMCP says which were left out
		}
	}
	return s, list, nil
}

// startError says why a server did not start, with the end of what it
// wrote to stderr.
func (s *mcpServer) startError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = fmt.Errorf("it did not answer within the time allowed (%w)", err)
	}
	if s.p != nil {
		if text := strings.TrimSpace(strings.ToValidUTF8(string(s.p.TailLines(proc.Stderr, stderrTail, stderrTail).Data), "")); text != "" {
			return fmt.Errorf("%w; it wrote: %s", err, text)
		}
	}
	return err
}

// startStdio starts a stdio server as a proc.Process, contained as the
// model's shells are (its cgroup or marks, and the keeper when offstage
// dies, so nothing it starts outlives it, setsid'd daemons included), and
// returns the transport that speaks MCP over its stdin and stdout. It
// runs in the session's directory, with the host's environment less what
// the session's environment policy withholds (its tools run at the
// model's request, as shells do), plus the variables the editor gave for
// it, which it always gets.
func (srv *server) startStdio(ctx context.Context, s *mcpServer, spec *acp.McpServerStdio, cwd string) (mcp.Transport, error) {
	env, _ := srv.cfg.Agent.Tools.Process.EnvPolicy.Apply(os.Environ())
	for _, v := range spec.Env {
		env = append(env, v.Name+"="+v.Value)
	}
	r, w := io.Pipe()
	p, err := proc.Start(context.WithoutCancel(ctx), proc.Config{
		Args:      append([]string{spec.Command}, spec.Args...),
		Dir:       cwd,
		Env:       env,
		EnvPolicy: environ.Policy{KeepAll: true}, // withheld above, before the editor's
		Stdin:     true,
		Stdout:    w,
		// The protocol is stdout alone; stderr is the server's log.
		SeparateStreams: true,
		// An idle server waits on its input by design: no prompt watch.
		PromptAfter: -1,
		HeadBytes:   stderrTail,
		TailBytes:   stderrTail,
		StreamBytes: stderrTail,
		// Its stderr is captured until every process holding the pipe has
		// closed it: one that escaped must not hold up the reaping.
		WaitDelay: mcpStopGrace,
	})
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "proc: "))
	}
	writes, stopWrites := context.WithCancel(context.Background())
	s.p, s.stdout, s.stopWrites = p, r, stopWrites
	go func() {
		<-p.Done()
		w.Close() // the SDK reads the end of the stream once all is copied
	}()
	return &mcp.IOTransport{Reader: r, Writer: procInput{p, writes}}, nil
}

// procInput is a stdio server's input, as the SDK writes it.
type procInput struct {
	p   *proc.Process
	ctx context.Context // ends when the server is closed
}

func (in procInput) Write(b []byte) (int, error) { return in.p.Input(in.ctx, b) }

// Close closes the input, unless a write holds it for longer than
// mcpStopGrace; close stops the server either way.
func (in procInput) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), mcpStopGrace)
	defer cancel()
	return in.p.CloseInput(ctx)
}

// headerClient is an HTTP client that sends the editor's headers with
// every request (an API key, say) to the server's own host only: a
// redirect elsewhere is followed without them, as net/http does with its
// own Authorization header, so a server cannot send the key on to another
// host.
func headerClient(base *http.Transport, endpoint string, headers []acp.HttpHeader) *http.Client {
	h := make(http.Header)
	for _, kv := range headers {
		h.Add(kv.Name, kv.Value)
	}
	host := ""
	if u, err := url.Parse(endpoint); err == nil {
		host = u.Host
	}
	return &http.Client{Transport: withHeaders{base, h, host}}
}

type withHeaders struct {
	base http.RoundTripper
	h    http.Header
	host string // the server's host:port
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != w.host {
		return w.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header[k] = v
	}
	return w.base.RoundTrip(r)
}

// close ends the connection: the SDK's session closes (with it the
// server's input), a stdio server gets mcpStopGrace to exit, then SIGTERM,
// then SIGKILL mcpStopGrace later (proc's Stop, which reaches every
// process it started), and it is reaped, and whatever it left is ended
// with it. It blocks until then, at most about three times mcpStopGrace.
func (s *mcpServer) close() {
	if s.stopWrites != nil {
		s.stopWrites() // a write that blocks would hold up closing the input
	}
	if s.cs != nil {
		s.cs.Close()
	}
	if s.p != nil {
		// After a failed Connect, or in case the SDK did not: nothing more
		// is read (a copy that blocks on it returns), and the input ends.
		s.stdout.Close()
		procInput{p: s.p}.Close()
		select {
		case <-s.p.Done():
		case <-time.After(mcpStopGrace):
			s.p.Stop(mcpStopGrace)
		}
		<-s.p.Done()
	}
	if s.http != nil {
		s.http.CloseIdleConnections()
	}
}

// closeMCP closes a session's servers, all at once, and returns when
// each is closed and reaped.
func closeMCP(servers []*mcpServer) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(s.close)
	}
	wg.Wait()
}

// mcpTool makes the tool the model calls for one of a server's tools.
//
// Safety, from the tool's annotations, which are the server's hints:
// read-only tools run unasked; every other call asks (see consequential),
// whether it says it is destructive or not, since a server's word that a
// tool only adds or changes things is no reason to let the model act
// without the user.
func (srv *server) mcpTool(s *mcpServer, t *mcp.Tool) (*tools.Tool, error) {
	name := "mcp__" + toolNamePart(s.name) + "__" + toolNamePart(t.Name)
	if len(name) > maxToolName {
		return nil, fmt.Errorf("its name as the model would see it, %s, is longer than %d characters, which model APIs refuse", name, maxToolName)
	}
	var schema jsonschema.Schema
	raw, err := json.Marshal(t.InputSchema)
	if err == nil && t.InputSchema != nil {
		err = json.Unmarshal(raw, &schema)
	} else if err == nil {
		schema = jsonschema.Schema{Type: "object"}
	}
	if err != nil {
		return nil, fmt.Errorf("its input schema is not JSON Schema: %v", err)
	}
	remote, cs := t.Name, s.cs
	tool, err := tools.DefineSchema(name, text.Clip(t.Description, mcpDescriptionBytes), &schema, srv.cfg.Agent.Tools.ResultBudget,
		func(ctx context.Context, _ *task.View, args json.RawMessage) (any, error) {
			return callMCP(ctx, cs, s.name, remote, args)
		})
	if err != nil {
		return nil, err
	}
	tool.Title = s.name + ": " + t.Name
	tool.Safety = tools.Destructive
	if a := t.Annotations; a != nil {
		switch {
		case a.ReadOnlyHint:
			tool.Safety = tools.ReadOnly
		case a.DestructiveHint != nil && !*a.DestructiveHint:
			tool.Safety = tools.Mutating
		}
		tool.Idempotent = a.IdempotentHint
		tool.OpenWorld = a.OpenWorldHint == nil || *a.OpenWorldHint
		if a.Title != "" {
			tool.Title = s.name + ": " + a.Title
		}
	}
	if t.Title != "" {
		tool.Title = s.name + ": " + t.Title
	}
	return tool, nil
}

// toolNamePart makes a server's or tool's name fit model APIs' tool
// names (letters, digits, _ and -), as Claude Code does: anything else
// becomes _.
func toolNamePart(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
}

// mcpOutput is what the model gets of a remote tool's result: its text
// content joined, what could not be shown named, and its structured
// content. The tool's budget caps it, saying so when it cuts.
type mcpOutput struct {
	Content    string `json:"content"`
	Structured any    `json:"structured_content,omitempty"`
}

// callMCP calls a server's tool. What goes wrong on the server's side (an
// error result, a JSON-RPC error, a server that died) is an error result
// the model reads, not a failure of offstage's runtime.
func callMCP(ctx context.Context, cs *mcp.ClientSession, server, tool string, args json.RawMessage) (any, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, tools.Fail("The call to %s of the MCP server %q was cancelled.", tool, server)
	case err != nil:
		return nil, tools.Fail("The MCP server %q did not run %s: %v.", server, tool, err)
	}
	text := contentText(res.Content)
	if res.IsError {
		if text == "" {
			text = "it gave no reason"
		}
		return nil, tools.Fail("%s (of the MCP server %q) failed: %s", tool, server, text)
	}
	return mcpOutput{Content: text, Structured: res.StructuredContent}, nil
}

// contentText joins a result's content as text; what is not text is
// named, not shown.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[an image, %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[%s](%s)", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
			case r.Text != "":
				parts = append(parts, r.URI+":\n"+r.Text)
			default:
				parts = append(parts, fmt.Sprintf("[%s, %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content, not shown]", c))
		}
	}
	return strings.Join(parts, "\n")
}
