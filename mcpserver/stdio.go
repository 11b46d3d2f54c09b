package mcpserver

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/internal/rpcline"
)

// maxLine bounds one JSON-RPC message on stdio; a longer line is refused
// and skipped, so memory stays bounded whatever a peer sends. It is the
// SDK's own cap (mcp.DefaultMaxLineLength) less one, past which the SDK
// would end the session.
const maxLine = mcp.DefaultMaxLineLength - 1

// DrainGrace bounds how long, once stdin ends, the requests already read
// may take to be answered before they are answered "abandoned" and the
// session ends.
const DrainGrace = 5 * time.Second

// Stdio returns a transport over in and out (newline-delimited JSON-RPC,
// as MCP's stdio transport specifies) that survives bad input, where the
// SDK's own transport would end the session and with it every task: a
// line that is not JSON gets a parse error (-32700); a batch, a message
// nested deeper than rpcline.DefaultMaxDepth, or one that is not a JSON-RPC
// 2.0 message (an id that is not a string or an integer within ±2^53
// among them) an invalid-request error (-32600); either is then skipped
// and the session goes on. A request whose params have a field of the
// wrong type (tools/call's name, tasks/get's taskId, …) gets an
// invalid-params error (-32602) naming the field and what to send. When in ends, the requests already read are
// answered (for up to DrainGrace) before the session ends. Replies and
// the SDK's messages never interleave within a line. A result a call
// delivered counts as delivered even if its answer could not be written:
// Service.RunStdio takes such results back.
func Stdio(in io.Reader, out io.Writer) mcp.Transport {
	r, w := rpcline.New(in, out, rpcline.Options{MaxLine: maxLine, Drain: DrainGrace, Check: checkParams})
	return &mcp.IOTransport{Reader: r, Writer: w}
}

// RunStdio serves one session over in and out, as
// Server().Run(ctx, Stdio(in, out)) does, and takes back what an answer
// that never reached the client carried: when the answer to a tool call
// that delivered results (task_wait's, a foreground bash's) could not be
// written whole (the write failed on a client that died, or the request
// was abandoned at the end of input), or was never written (the session
// ended first), those results become undelivered again, so that a later
// task_wait, a resume or an attach delivers them once. An answer the
// pipe took counts as delivered, read or not: a client that dies with it
// unread in the pipe cannot be seen.
//
// When ctx ends, RunStdio returns once the session has, or DrainGrace
// later if an answer is still stuck on a client that reads nothing (an
// outsider's finding: offstage mcp, SIGTERMed, stayed for as long as its
// client did not read): what that answer carried is taken back, and the
// write is left to end with the process.
func (s *Service) RunStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	c := s.newConn()
	c.answers = newAnswers()
	r, w := rpcline.New(in, out, rpcline.Options{MaxLine: maxLine, Drain: DrainGrace, Check: checkParams,
		Stamp: stampToolCalls, Sent: c.answers.sent})
	ran := make(chan error, 1)
	go func() { ran <- c.server.Run(ctx, &mcp.IOTransport{Reader: r, Writer: w}) }()
	select {
	case err := <-ran:
		return err
	case <-ctx.Done():
	}
	stuck := time.NewTimer(DrainGrace)
	defer stuck.Stop()
	select {
	case err := <-ran:
		return err
	case <-stuck.C:
	}
	back := c.answers.returnAll()
	s.cfg.Logger.Info("the client read nothing for "+DrainGrace.String()+" after the shutdown began: its session is left with an answer unwritten", "tasks taken back", back)
	return fmt.Errorf("mcpserver: an answer could not be written within %s of the shutdown (the client reads nothing)", DrainGrace)
}
