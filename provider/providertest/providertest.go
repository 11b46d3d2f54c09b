// Package providertest runs fake model endpoints for tests: an OpenAI
// Chat Completions server and an Anthropic Messages server on loopback,
// each speaking its real wire format (JSON requests, SSE streams). A
// provider.Model, usually a scripted one, decides the answers: the server
// decodes each request back into a provider.Request, asks the model, and
// streams the answer the way the real API does, with tool arguments split
// across chunks. Failures can be injected.
package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/offstage/offstage/provider"
)

// Server is a fake endpoint. Close it when done.
type Server struct {
	*httptest.Server
	// Requests counts the requests received, failed ones included.
	Requests atomic.Int64

	model provider.Model
	opts  Options

	mu     sync.Mutex
	failed int // guarded by mu: failures injected so far
	bodies []map[string]any
}

// Options inject failures.
type Options struct {
	// FailFirst answers the first FailFirst requests with FailStatus (and
	// a retry-after of 1 ms), then answers normally.
	FailFirst  int
	FailStatus int
	// FailBody is the JSON error body of those failures; a default one
	// is used if empty.
	FailBody string
	// Hang sends the first event of each stream and then blocks until the
	// client goes away.
	Hang bool
	// Malformed sends a broken event after the first one.
	Malformed bool
	// Key, if set, must be presented (Authorization: Bearer, or x-api-key).
	Key string
}

func newServer(model provider.Model, opts Options, handle func(*Server, http.ResponseWriter, *http.Request)) *Server {
	s := &Server{model: model, opts: opts}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		if opts.Key != "" && r.Header.Get("Authorization") != "Bearer "+opts.Key && r.Header.Get("X-Api-Key") != opts.Key {
			http.Error(w, `{"error": {"type": "authentication_error", "message": "invalid api key"}}`, http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		fail := s.failed < opts.FailFirst
		if fail {
			s.failed++
		}
		s.mu.Unlock()
		if fail {
			body := opts.FailBody
			if body == "" {
				body = fmt.Sprintf(`{"error": {"type": "error", "message": "injected failure %d"}}`, opts.FailStatus)
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("retry-after-ms", "1")
			w.WriteHeader(opts.FailStatus)
			w.Write([]byte(body))
			return
		}
		handle(s, w, r)
	}))
	return s
}

// Bodies returns the JSON bodies of the requests answered, for checks.
func (s *Server) Bodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

func (s *Server) record(body map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, body)
}

// sse writes server-sent events and honours Hang and Malformed.
type sse struct {
	w    http.ResponseWriter
	r    *http.Request
	opts Options
	n    int
}

func newSSE(w http.ResponseWriter, r *http.Request, opts Options) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, r: r, opts: opts}
}

// send writes one event; it returns false if the stream must stop.
func (s *sse) send(event string, data any) bool {
	var payload string
	if raw, ok := data.(string); ok {
		payload = raw
	} else {
		b, _ := json.Marshal(data)
		payload = string(b)
	}
	if event != "" {
		fmt.Fprintf(s.w, "event: %s\n", event)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", payload)
	s.w.(http.Flusher).Flush()
	s.n++
	if s.n == 1 && s.opts.Hang {
		<-s.r.Context().Done()
		return false
	}
	if s.n == 1 && s.opts.Malformed {
		fmt.Fprintf(s.w, "data: {\"this is\": not json\n\n")
		s.w.(http.Flusher).Flush()
		return false
	}
	return true
}

// answer asks the model, turning its failure into a 500 with the reason.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, req provider.Request) (provider.Response, bool) {
	res, err := s.model.Generate(r.Context(), req, nil)
	if err != nil {
		http.Error(w, fmt.Sprintf(`{"error": {"type": "api_error", "message": %q}}`, err.Error()), http.StatusInternalServerError)
		return res, false
	}
	return res, true
}

// split cuts s into about n pieces, so streamed arguments arrive in parts
// the way real servers send them.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := max(1, (len(s)+n-1)/n)
	var out []string
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	return append(out, s)
}

// words splits text into streamed deltas.
func words(s string) []string { return strings.SplitAfter(s, " ") }

const markerPrefix = "[providertest agent: "

// Marker is a line to put in a sub-agent profile's system prompt so the
// fake servers know whose script answers: the real wire formats carry no
// agent name, and a scripted model picks its script by provider.Request.Agent.
func Marker(agent string) string { return markerPrefix + agent + "]" }

func agentOf(system string) string {
	i := strings.Index(system, markerPrefix)
	if i < 0 {
		return ""
	}
	rest := system[i+len(markerPrefix):]
	if j := strings.IndexByte(rest, ']'); j >= 0 {
		return rest[:j]
	}
	return ""
}
