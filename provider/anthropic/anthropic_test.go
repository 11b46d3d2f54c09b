package anthropic_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/anthropic"
	"github.com/offstage/offstage/provider/providertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func connect(t *testing.T, baseURL, key string, retries int) provider.Model {
	m, err := anthropic.New(anthropic.Config{Model: "claude-fake", APIKey: key, BaseURL: baseURL, MaxRetries: retries})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAgainstAFakeServer(t *testing.T) {
	providertest.Suite(t, providertest.Anthropic, connect)
}

func TestConfiguration(t *testing.T) {
	for _, cfg := range []anthropic.Config{
		{APIKey: "k"},
		{Model: "claude"},
		{Model: "claude", APIKey: "k", MaxTokens: 1000, ThinkingBudget: 2000},
	} {
		if _, err := anthropic.New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}
