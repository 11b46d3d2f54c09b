package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/task"
)

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// openSessions opens n initialised sessions (over in-memory transports,
// as stdio, or over HTTP) that each called task_list once, and returns
// their client sessions. They do not list the tools: the go-sdk client
// keeps what it listed, in this process, and it is not the server's.
func openSessions(b *testing.B, svc *mcpserver.Service, url string, n int) []*mcp.ClientSession {
	b.Helper()
	ctx := context.Background()
	out := make([]*mcp.ClientSession, 0, n)
	for range n {
		var t mcp.Transport
		if url == "" {
			ct, st := mcp.NewInMemoryTransports()
			if _, err := svc.Server().Connect(ctx, st, nil); err != nil {
				b.Fatal(err)
			}
			t = ct
		} else {
			t = &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true, HTTPClient: &http.Client{Transport: benchToken{}}}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, t, nil)
		if err != nil {
			b.Fatal(err)
		}
		// A call gives the session its task table now (initialized is a
		// notification, whose handler runs a moment later).
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "task_list", Arguments: map[string]any{}}); err != nil {
			b.Fatal(err)
		}
		out = append(out, cs)
	}
	return out
}

// benchToken sends the benchmark's token.
type benchToken struct{}

func (benchToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer bench")
	return http.DefaultTransport.RoundTrip(r)
}

// BenchmarkIdleSession reports the heap an idle, initialised session
// holds (bytes/session), over in-memory transports (as stdio) and over
// HTTP, clients included (the in-memory client's share is small; over
// HTTP the client's state is in this process too).
func BenchmarkIdleSession(b *testing.B) {
	const n = 200
	for _, face := range []string{"stdio", "http"} {
		b.Run(face, func(b *testing.B) {
			var per float64
			for b.Loop() {
				svc, err := mcpserver.New(context.Background(), mcpserver.Config{MaxSessions: -1})
				if err != nil {
					b.Fatal(err)
				}
				url := ""
				var srv *httptest.Server
				if face == "http" {
					srv = httptest.NewServer(svc.HTTPHandler("bench", nil))
					url = srv.URL
				}
				sessions := openSessions(b, svc, url, 1) // the process-wide share, paid once
				before := heapInUse()
				sessions = append(sessions, openSessions(b, svc, url, n)...)
				per = float64(heapInUse()-before) / n
				if path := os.Getenv("OFFSTAGE_IDLE_HEAP"); path != "" {
					f, err := os.Create(path + "." + face)
					if err != nil {
						b.Fatal(err)
					}
					pprof.WriteHeapProfile(f)
					f.Close()
				}
				for _, cs := range sessions {
					cs.Close()
				}
				svc.Close(context.Background())
				if srv != nil {
					srv.Close()
				}
			}
			b.ReportMetric(per, "bytes/session")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleCPU reports the share of a core offstage uses while idle
// (cpu-%): 200 initialised sessions, the first holding 1,000 sleeping
// shells, measured over a 10 s window in which nothing happens.
func BenchmarkIdleCPU(b *testing.B) {
	const sessions, shells, window = 200, 1000, 10 * time.Second
	var share float64
	for b.Loop() {
		svc, err := mcpserver.New(context.Background(), mcpserver.Config{Agent: agent.Config{Tasks: task.Options{MaxRunning: shells, MaxTasks: 2 * shells}}})
		if err != nil {
			b.Fatal(err)
		}
		css := openSessions(b, svc, "", sessions)
		// A duration of this run's own, to count its sleeps by.
		sleep := fmt.Sprintf("1000.%d", os.Getpid())
		args := json.RawMessage(`{"command":"exec sleep ` + sleep + `","run_in_background":true}`)
		for i := range shells {
			if res, err := css[0].CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: args}); err != nil || res.IsError {
				b.Fatalf("bash %d: %v %+v", i, err, res)
			}
		}
		settleShells(b, "sleep\x00"+sleep+"\x00", shells)
		start, t0 := cpuTime(), time.Now()
		time.Sleep(window)
		share = float64(cpuTime()-start) / float64(time.Since(t0)) * 100
		for _, cs := range css {
			cs.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		svc.Close(ctx)
		cancel()
	}
	b.ReportMetric(share, "cpu-%")
}

// settleShells waits until n processes run cmdline (NUL-separated, as
// /proc/PID/cmdline holds it), so that every shell has exec'd its
// command, then settle more for what the starts left going (the
// collection of their garbage). A bash call returns once its shell has
// started, before the shell execs: where a start costs 3-4 ms of CPU (a
// host whose page tables are emulated), the last of 1,000 execs came 5 s
// after the last call, inside a window that then measured the starts'
// tail (5-8% of a core), not idleness. Where there is no /proc, it
// waits 15 s.
func settleShells(b *testing.B, cmdline string, n int) {
	for deadline := time.Now().Add(time.Minute); ; {
		got, ok := countCmdline(cmdline)
		if !ok {
			time.Sleep(15 * time.Second)
			return
		}
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d shells exec'd their command within a minute", got, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(settle)
}

// settle is how long BenchmarkIdleCPU waits, after its shells have
// exec'd, before its window: on a slow host 2 s left 0.12-0.74% of a
// core to the starts' aftermath in the window, 5 s 0.02-0.03%.
const settle = 5 * time.Second

// countCmdline counts the processes whose command line is cmdline; ok is
// false where /proc cannot be read.
func countCmdline(cmdline string) (n int, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == cmdline {
			n++
		}
	}
	return n, true
}
