// Package demo holds the script of `offstage demo`: a scripted model (see
// package provider/scripted for the format) that shows every capability
// of offstage in about ten seconds, with real shells and sub-agents. The
// CLI embeds it; read demo.json to see what the model will say and do.
package demo

import (
	"embed"

	"github.com/offstage/offstage/agent"
)

// Script is demo.json.
//
//go:embed demo.json
var Script []byte

// Prompt is the user's message that starts the demo.
const Prompt = "Build the project, run the tests, have someone check the logs and the docs, and keep me posted."

//go:embed agents/*.md
var agentFiles embed.FS

// Profiles returns the demo's sub-agents: the profile files in agents/,
// which "offstage run --script examples/demo/demo.json --agents
// examples/demo/agents" reads from disk.
func Profiles() ([]agent.Profile, error) {
	entries, err := agentFiles.ReadDir("agents")
	if err != nil {
		return nil, err
	}
	var list []agent.Profile
	for _, e := range entries {
		path := "agents/" + e.Name()
		data, err := agentFiles.ReadFile(path)
		if err != nil {
			return nil, err
		}
		p, _, err := agent.ParseProfile(path, data)
		if err != nil {
			return nil, err
		}
		list = append(list, p)
	}
	return list, nil
}
