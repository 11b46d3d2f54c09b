package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// requireJaegerEnv makes a missing Jaeger a failure of the tracing test
// instead of a skip (.ci/run builds Jaeger and sets it).
const requireJaegerEnv = "OFFSTAGE_REQUIRE_JAEGER"

// jaegerBinary is the Jaeger (v2, all in one) the tracing test sends its
// spans to: $OFFSTAGE_JAEGER, or jaeger on the PATH.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OFFSTAGE_JAEGER"); p != "" {
		return p
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p
	}
	if os.Getenv(requireJaegerEnv) != "" {
		t.Fatalf("no Jaeger (set OFFSTAGE_JAEGER or put jaeger on the PATH), and %s is set", requireJaegerEnv)
	}
	t.Skip("no Jaeger: .ci/run builds it (github.com/jaegertracing/jaeger/cmd/jaeger v1.76.0) and sets OFFSTAGE_JAEGER")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startJaeger runs Jaeger with an OTLP/HTTP receiver and its query API on
// ports of its own, in memory, and returns both addresses.
func startJaeger(t *testing.T) (otlp, query string) {
	t.Helper()
	bin := jaegerBinary(t)
	otlpPort, queryPort, grpcPort := freePort(t), freePort(t), freePort(t)
	config := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 1000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, queryPort, grpcPort, otlpPort)
	file := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", file)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	query = fmt.Sprintf("http://127.0.0.1:%d", queryPort)
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(query + "/api/services")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger did not start: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", otlpPort), query
}

// jaegerSpan is a span as Jaeger's query API gives it.
type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// parent is the span s refers to: a child's parent (CHILD_OF) or, for a
// task that outlives its call, the call it follows from (Jaeger shows a
// parent that is also a link as FOLLOWS_FROM).
func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" || r.RefType == "FOLLOWS_FROM" {
			return r.SpanID
		}
	}
	return ""
}

// TestRunIsTracedInJaeger (issue 40 item 2): with the standard OTLP
// environment set, offstage run sends one trace per turn to a real
// collector (Jaeger, read back through its query API): the turn, its
// model calls, the bash call, the background shell as that call's child
// ending with its exit code, and the autonomous turn its result caused;
// the shell's command sees TRACEPARENT naming the shell's span.
func TestRunIsTracedInJaeger(t *testing.T) {
	otlp, query := startJaeger(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 0.3; echo tp=$TRACEPARENT", "run_in_background": true}}]},
		{"text": "started"},
		{"expect": "tp=00-", "text": "it printed its traceparent"}
	]}`), 0o600)
	cmd, mark := offstage(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp, "OTEL_SERVICE_NAME=offstage-test"}, "run", "--script", script, "go")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	noSurvivors(t, mark)

	var spans []jaegerSpan
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans = spans[:0]
		res, err := http.Get(query + "/api/traces?service=offstage-test&limit=20")
		if err == nil {
			var body struct {
				Data []struct {
					Spans []jaegerSpan `json:"spans"`
				} `json:"data"`
			}
			json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			for _, tr := range body.Data {
				spans = append(spans, tr.Spans...)
			}
		}
		if count(spans, "offstage.task shell") == 1 && count(spans, "invoke_agent offstage") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger has %d spans: %v", len(spans), names(spans))
		}
		time.Sleep(200 * time.Millisecond)
	}
	byID := map[string]jaegerSpan{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	var shell, call jaegerSpan
	for _, s := range spans {
		switch s.OperationName {
		case "offstage.task shell":
			shell = s
		case "execute_tool bash":
			call = s
		}
	}
	if shell.parent() != call.SpanID || call.tag("gen_ai.tool.name") != "bash" || call.tag("gen_ai.tool.call.id") == "" {
		t.Errorf("the shell's span is not the bash call's child: shell %+v, call %+v", shell, call)
	}
	if turn := byID[call.parent()]; turn.OperationName != "invoke_agent offstage" || turn.tag("gen_ai.conversation.id") == "" {
		t.Errorf("the bash call's parent is %+v, want the turn", turn)
	}
	if shell.tag("process.exit.code") != "0" || shell.tag("offstage.task.id") != "shell:1" {
		t.Errorf("the shell's span tags: %+v", shell.Tags)
	}
	if count(spans, "chat") != 3 {
		t.Errorf("chat spans: %d, want 3 (%v)", count(spans, "chat"), names(spans))
	}
	if !strings.Contains(errOut.String()+out.String(), "it printed its traceparent") {
		t.Errorf("the autonomous turn did not see the command's TRACEPARENT:\n%s%s", out.String(), errOut.String())
	}
	// The turn the shell's result started links back to the shell's span.
	linked := false
	for _, s := range spans {
		for _, r := range s.References {
			linked = linked || s.OperationName == "invoke_agent offstage" && r.SpanID == shell.SpanID
		}
	}
	if !linked {
		t.Errorf("no turn links to the shell's span:\n%s", traceTree(spans))
	}
	t.Logf("the trace, as Jaeger keeps it:\n%s", traceTree(spans))
}

// traceTree draws spans as Jaeger relates them, one per line, a child
// under its parent; a span that follows from another (a link) is drawn
// under it with "~>".
func traceTree(spans []jaegerSpan) string {
	kids := map[string][]jaegerSpan{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	var roots []jaegerSpan
	for _, s := range spans {
		if p := s.parent(); p != "" && ids[p] {
			kids[p] = append(kids[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var draw func(s jaegerSpan, depth int)
	draw = func(s jaegerSpan, depth int) {
		arrow := ""
		for _, r := range s.References {
			if r.RefType == "FOLLOWS_FROM" {
				arrow = "~> "
			}
		}
		fmt.Fprintf(&b, "%s%s%s", strings.Repeat("  ", depth), arrow, s.OperationName)
		for _, k := range []string{"gen_ai.tool.name", "offstage.task.id", "process.exit.code", "offstage.ended_by"} {
			if v := s.tag(k); v != "" {
				fmt.Fprintf(&b, " %s=%s", k, v)
			}
		}
		b.WriteByte('\n')
		for _, k := range kids[s.SpanID] {
			draw(k, depth+1)
		}
	}
	for _, r := range roots {
		draw(r, 0)
	}
	return b.String()
}

func count(spans []jaegerSpan, name string) int {
	n := 0
	for _, s := range spans {
		if s.OperationName == name {
			n++
		}
	}
	return n
}

func names(spans []jaegerSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.OperationName)
	}
	return out
}

// TestRunSendsOTLP: the same run, its spans read off the OTLP/HTTP wire by
// a receiver in the test (the exporter's protobuf, decoded with OTLP's own
// types), so the trace is checked wherever the tests run, Jaeger or not.
func TestRunSendsOTLP(t *testing.T) {
	type span struct{ name, id, parent string }
	var mu sync.Mutex
	var got []span
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not OTLP traces", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					got = append(got, span{s.Name, hex.EncodeToString(s.SpanId), hex.EncodeToString(s.ParentSpanId)})
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	defer srv.Close()
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo hi", "run_in_background": true}}]},
		{"text": "started"},
		{"expect": "hi", "text": "done"}
	]}`), 0o600)
	cmd, mark := offstage(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL}, "run", "--script", script, "--no-journal", "go")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	noSurvivors(t, mark)
	mu.Lock()
	defer mu.Unlock()
	ids := map[string]string{}
	for _, s := range got {
		ids[s.id] = s.name
	}
	tree := map[string]string{} // span name → its parent's name
	for _, s := range got {
		tree[s.name] = ids[s.parent]
	}
	want := map[string]string{"offstage.task shell": "execute_tool bash", "execute_tool bash": "invoke_agent offstage", "chat": "invoke_agent offstage", "invoke_agent offstage": ""}
	for name, parent := range want {
		if p, ok := tree[name]; !ok || p != parent {
			t.Errorf("span %q: parent %q (present %v), want %q; all: %v", name, p, ok, parent, got)
		}
	}
}

// TestTracingIsOffWithoutTheEnvironment pins when offstage traces.
func TestTracingIsOffWithoutTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := tracingOn(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("tracingOn(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// TestABadOTLPSettingIsAUsageError: an endpoint without a scheme was
// mangled by the exporter into https:///v1/traces, and a gRPC protocol
// set for traces alone was blamed on the general variable (an outside
// trial). Each is refused at start, naming the variable that holds it.
func TestABadOTLPSettingIsAUsageError(t *testing.T) {
	script, _ := filepath.Abs(filepath.Join("..", "..", "examples", "scripted", "hello.json"))
	for _, c := range []struct{ env, want string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT=otelhost:4318", `OTEL_EXPORTER_OTLP_ENDPOINT="otelhost:4318" is not an http:// or https:// URL`},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=::nope", `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="::nope" is not an http:// or https:// URL`},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is grpc"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL=http/json", "OTEL_EXPORTER_OTLP_PROTOCOL is http/json"},
	} {
		env := []string{c.env}
		if !strings.Contains(c.env, "ENDPOINT") {
			env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9")
		}
		cmd, _ := offstage(t, env, "run", "--script", script, "--no-journal", "go")
		out, err := cmd.CombinedOutput()
		if code := exitOf(t, err); code != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: exit %d\n%s", c.env, code, out)
		}
	}
}
