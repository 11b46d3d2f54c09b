// Package demo holds the script of `offstage demo`: a scripted model (see
// package provider/scripted for the format) that shows every capability
// of offstage in about ten seconds, with real shells and sub-agents. The
// CLI embeds it; read demo.json to see what the model will say and do.
package demo

import (
	_ "embed"

	"github.com/offstage/offstage/agent"
)

// Script is demo.json.
//
//go:embed demo.json
var Script []byte

// Prompt is the user's message that starts the demo.
const Prompt = "Build the project, run the tests, have someone check the logs and the docs, and keep me posted."

// Profiles are the demo's sub-agents.
var Profiles = []agent.Profile{
	{Name: "log-reader", Description: "Reads system logs and reports problems.", System: "You read logs.", Tools: []string{"bash", "task_list"}},
	{Name: "doc-reader", Description: "Reads documentation and summarises it.", System: "You read docs.", Tools: []string{"bash", "task_list"}},
}
