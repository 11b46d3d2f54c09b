package mcpserver

import (
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/internal/rpcline"
)

// maxLine bounds one JSON-RPC message on stdio; a longer line is refused
// and skipped, so memory stays bounded whatever a peer sends.
const maxLine = 16 << 20

// Stdio returns a transport over in and out (newline-delimited JSON-RPC,
// as MCP's stdio transport specifies) that survives bad input: a line
// that is not JSON gets a parse error (-32700), and one that is not a
// JSON-RPC 2.0 message an invalid-request error (-32600); either is then
// skipped and the session goes on, where the SDK's own transport would end
// it. Replies and the SDK's messages never interleave within a line.
func Stdio(in io.Reader, out io.Writer) mcp.Transport {
	w := rpcline.NewWriter(out)
	return &mcp.IOTransport{
		Reader: rpcline.NewReader(in, w, rpcline.Options{MaxLine: maxLine, Batches: true}),
		Writer: w,
	}
}
