package openai_test

import (
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
