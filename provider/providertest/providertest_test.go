package providertest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/anthropic"
	"github.com/offstage/offstage/provider/openai"
	"github.com/offstage/offstage/provider/providertest"
	"github.com/offstage/offstage/provider/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Both wire formats carry the model's thinking, and the marker in a
// sub-agent's system prompt picks its script.
func TestThinkingAndAgentsCrossTheWire(t *testing.T) {
	script, err := scripted.Parse([]byte(`{"turns": [], "agents": {"helper": [{"thinking": "hmm, let me see", "text": "ok"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	req := provider.Request{System: "You help.\n" + providertest.Marker("helper"), Messages: []provider.Message{
		{Role: provider.User, Content: []provider.Block{{Type: provider.Text, Text: "go"}}},
	}}
	for name, pair := range map[string]struct {
		endpoint providertest.Endpoint
		connect  func(url string) (provider.Model, error)
	}{
		"openai": {providertest.OpenAI, func(url string) (provider.Model, error) {
			return openai.New(openai.Config{Model: "m", APIKey: "k", BaseURL: url})
		}},
		"anthropic": {providertest.Anthropic, func(url string) (provider.Model, error) {
			return anthropic.New(anthropic.Config{Model: "m", APIKey: "k", BaseURL: url})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			srv := pair.endpoint(script, providertest.Options{})
			defer srv.Close()
			m, err := pair.connect(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			var thinking string
			res, err := m.Generate(t.Context(), req, func(e provider.Event) {
				if e.Type == provider.ThinkingDelta {
					thinking += e.Text
				}
			})
			if err != nil || res.Message.TextOf() != "ok" || thinking != "hmm, let me see" {
				t.Errorf("Generate = %+v, thinking %q, %v", res, thinking, err)
			}
		})
	}
}
