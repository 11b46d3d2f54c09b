package main

import (
	"cmp"
	"flag"
	"path/filepath"

	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/anthropic"
	"github.com/offstage/offstage/provider/openai"
	"github.com/offstage/offstage/provider/scripted"
)

// modelFlags are how `run` picks a model.
type modelFlags struct {
	provider string
	model    string
	baseURL  string
	script   string
}

const (
	defaultOpenAIModel    = "gpt-4.1"
	defaultAnthropicModel = "claude-sonnet-4-5"
)

// register declares the model flags on fs; note adds to --provider's
// help what the command uses the model for.
func (f *modelFlags) register(fs *flag.FlagSet, note string) {
	if note != "" {
		note = " (" + note + ")"
	}
	fs.StringVar(&f.provider, "provider", "", "openai, anthropic or scripted; default: scripted with --script, else whichever key is set"+note)
	fs.StringVar(&f.model, "model", "", "model name (default "+defaultOpenAIModel+" or "+defaultAnthropicModel+")")
	fs.StringVar(&f.baseURL, "base-url", "", "API base URL of an OpenAI-compatible server (Ollama, vLLM, LM Studio…); default: OPENAI_BASE_URL, or the provider's")
	fs.StringVar(&f.script, "script", "", "a scripted model's script file, JSON turns played in order, for trying offstage without a key (the format: offstage run --help)")
}

// providerName is the provider the flags and environment choose, "" for
// none.
func providerName(f modelFlags, getenv func(string) string) string {
	switch {
	case f.provider != "":
		return f.provider
	case f.script != "":
		return "scripted"
	case getenv("OPENAI_API_KEY") != "" || getenv("OPENAI_BASE_URL") != "" || f.baseURL != "":
		return "openai"
	case getenv("ANTHROPIC_API_KEY") != "":
		return "anthropic"
	}
	return ""
}

// newModel builds the model from flags and environment: OPENAI_API_KEY and
// OPENAI_BASE_URL, ANTHROPIC_API_KEY. Without --provider it picks scripted
// if --script is given, else whichever provider has a key set. Every
// mistake is a usage error: one sentence saying what to set.
func newModel(f modelFlags, getenv func(string) string) (provider.Model, error) {
	name := providerName(f, getenv)
	switch name {
	case "":
		return nil, usagef("no model is configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY, or pass --base-url for a local OpenAI-compatible server (try \"offstage demo\" for a tour that needs no key)")
	case "scripted":
		if f.script == "" {
			return nil, usagef("--provider scripted needs --script FILE (offstage run --help says what goes in it)")
		}
		m, err := scripted.Load(f.script)
		if err != nil {
			return nil, usagef("%v", err)
		}
		return m, nil
	case "openai":
		base := f.baseURL
		if base == "" {
			base = getenv("OPENAI_BASE_URL")
		}
		model := f.model
		if model == "" {
			model = defaultOpenAIModel
		}
		m, err := openai.New(openai.Config{Model: model, APIKey: getenv("OPENAI_API_KEY"), BaseURL: base})
		if err != nil {
			return nil, usagef("%v", err)
		}
		return m, nil
	case "anthropic":
		model := f.model
		if model == "" {
			model = defaultAnthropicModel
		}
		m, err := anthropic.New(anthropic.Config{Model: model, APIKey: getenv("ANTHROPIC_API_KEY"), BaseURL: f.baseURL})
		if err != nil {
			return nil, usagef("%v", err)
		}
		return m, nil
	}
	return nil, usagef("unknown provider %q: use openai, anthropic or scripted", name)
}

// describe names the model the flags select, for the journal: "openai
// gpt-4.1", "anthropic claude-sonnet-4-5", "scripted demo.json".
func (f modelFlags) describe(getenv func(string) string) string {
	switch name := providerName(f, getenv); name {
	case "scripted":
		return "scripted " + filepath.Base(f.script)
	case "openai":
		return "openai " + cmp.Or(f.model, defaultOpenAIModel)
	case "anthropic":
		return "anthropic " + cmp.Or(f.model, defaultAnthropicModel)
	default:
		return name
	}
}
