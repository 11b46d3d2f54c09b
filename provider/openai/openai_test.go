package openai_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/openai"
	"github.com/offstage/offstage/provider/providertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func connect(t *testing.T, baseURL, key string, retries int) provider.Model {
	m, err := openai.New(openai.Config{Model: "fake-model", APIKey: key, BaseURL: baseURL, MaxRetries: retries})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAgainstAFakeServer(t *testing.T) {
	providertest.Suite(t, providertest.OpenAI, connect)
}

func TestConfiguration(t *testing.T) {
	if _, err := openai.New(openai.Config{APIKey: "k"}); err == nil {
		t.Error("New without a model name = nil error")
	}
	if _, err := openai.New(openai.Config{Model: "gpt"}); err == nil {
		t.Error("New for OpenAI without a key = nil error")
	}
	if _, err := openai.New(openai.Config{Model: "llama", BaseURL: "http://127.0.0.1:11434/v1"}); err != nil {
		t.Errorf("New for a local server without a key = %v", err)
	}
}

// answer is a hand-written endpoint that answers every request with
// status and body, as a server that is not quite OpenAI's does.
func answer(t *testing.T, status int, contentType, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

var hello = provider.Request{Messages: []provider.Message{{Role: provider.User, Content: []provider.Block{{Type: provider.Text, Text: "hi"}}}}}

// A wrong --base-url showed Go internals: a body whose "error" is a
// string came back as "malformed response stream: json: cannot unmarshal
// string into Go value of type apierror.Error", losing the status and the
// message. Every shape now gives the status, the message and, for a
// base URL without /v1, the hint.
func TestErrorBodiesOfAnyShape(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body, want string
	}{
		{"error as a string", "application/json", `{"error":"boom"}`, "boom"},
		{"error object", "application/json", `{"error":{"message":"boom","type":"x"}}`, "boom"},
		{"message at the top", "application/json", `{"object":"error","message":"boom","code":404}`, "boom"},
		{"detail", "application/json", `{"detail":"boom"}`, "boom"},
		{"error as a number", "application/json", `{"error":404}`, "Not Found"},
		{"plain text", "text/plain", "boom\n", "boom"},
		{"HTML page", "text/html", "<html><head><title>boom</title></head><body><h1>404</h1></body></html>", "boom"},
		{"empty", "application/json", "", "Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := answer(t, http.StatusNotFound, tc.contentType, tc.body)
			_, err := connect(t, srv.URL, "k", -1).Generate(t.Context(), hello, nil)
			var se *provider.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("Generate() = %v, want a *provider.StatusError", err)
			}
			if se.Status != 404 || se.Message != tc.want {
				t.Errorf("StatusError{Status: %d, Message: %q}, want 404, %q", se.Status, se.Message, tc.want)
			}
			if errors.Is(err, provider.ErrBadStream) || strings.Contains(err.Error(), "Go value") {
				t.Errorf("Generate() = %v, want no \"malformed\" and no Go type", err)
			}
			if want := "no /v1 at its end: most OpenAI-compatible servers want " + srv.URL + "/v1"; !strings.Contains(err.Error(), want) {
				t.Errorf("Generate() = %v, want the hint %q", err, want)
			}
		})
	}
}

// With /v1 in the base URL there is no /v1 to suggest, but still a hint.
func TestNotFoundWithV1SaysCheckTheURL(t *testing.T) {
	srv := answer(t, http.StatusNotFound, "application/json", `{"error":"Unexpected endpoint or method. (POST /v1/chat/completions)"}`)
	_, err := connect(t, srv.URL+"/v1", "k", -1).Generate(t.Context(), hello, nil)
	if err == nil || !strings.Contains(err.Error(), "HTTP 404: Unexpected endpoint") || !strings.Contains(err.Error(), "check the base URL") || strings.Contains(err.Error(), "no /v1") {
		t.Errorf("Generate() = %v", err)
	}
}

// An error event in the stream was called "malformed response stream",
// and an invalid key reported that way exited 1 instead of 2 (the CLI
// branches on ErrAuth).
func TestErrorEventInTheStream(t *testing.T) {
	for _, tc := range []struct {
		event string
		want  error
	}{
		{`{"error":{"message":"Invalid API key provided","code":401}}`, provider.ErrAuth},
		{`{"error":{"message":"nope","type":"invalid_api_key"}}`, provider.ErrAuth},
		{`{"error":{"message":"Rate limit exceeded","code":429}}`, provider.ErrRateLimited},
		{`{"error":"the model crashed"}`, nil},
	} {
		srv := answer(t, http.StatusOK, "text/event-stream", "data: "+tc.event+"\n\n")
		_, err := connect(t, srv.URL, "k", -1).Generate(t.Context(), hello, nil)
		var se *provider.StreamError
		if !errors.As(err, &se) || se.Message == "" || strings.Contains(se.Message, "{") {
			t.Errorf("Generate() = %v, want a *provider.StreamError with the message", err)
			continue
		}
		if errors.Is(err, provider.ErrBadStream) || strings.Contains(err.Error(), "malformed") {
			t.Errorf("Generate() = %v, want not malformed", err)
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Generate() = %v, want %v", err, tc.want)
		}
	}
}

// A local server asked for a model it does not have: ErrUnknownModel,
// and Models says which it has.
func TestUnknownModelAndTheModelsListed(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"object":"error","message":"The model `+"`fake-model`"+` does not exist.","type":"NotFoundError","param":null,"code":404}`)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"qwen3:8b","object":"model"},{"id":"llama3.2","object":"model"}]}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	m, err := openai.New(openai.Config{Model: "fake-model", BaseURL: srv.URL + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(t.Context(), hello, nil); !errors.Is(err, provider.ErrUnknownModel) || strings.Contains(err.Error(), "/v1 at its end") {
		t.Errorf("Generate() = %v, want ErrUnknownModel and no /v1 hint", err)
	}
	names, err := m.Models(t.Context())
	if err != nil || strings.Join(names, ",") != "qwen3:8b,llama3.2" {
		t.Errorf("Models() = %q, %v", names, err)
	}
}
