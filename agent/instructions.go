package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// MaxInstructionBytes caps the project instructions added to a system
// prompt: 32 KiB, about 8,000 tokens. More is cut, and the cut is said.
const MaxInstructionBytes = 32 << 10

// FindProjectInstructions reads the AGENTS.md files from dir up to the
// repository root (the nearest directory holding .git; without one, dir
// alone), outermost first, so the instructions nearest the work come last
// and weigh most, as the convention (Codex, opencode…) has it. It returns
// their text, each under a heading naming its file, cut to
// MaxInstructionBytes, and the files read. No file is no error.
func FindProjectInstructions(dir string) (string, []string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	var chain []string
	for d := dir; ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			break
		}
		if filepath.Dir(d) == d {
			chain = chain[:1] // no repository: the directory alone
			break
		}
	}
	var b strings.Builder
	var files []string
	for i := len(chain) - 1; i >= 0; i-- {
		path := filepath.Join(chain[i], "AGENTS.md")
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return "", files, fmt.Errorf("reading %s: %w", path, err)
		}
		files = append(files, path)
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", path, strings.TrimSpace(string(data)))
	}
	text := strings.TrimSpace(b.String())
	if len(text) > MaxInstructionBytes {
		cut := MaxInstructionBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + fmt.Sprintf("\n…(%d more bytes of project instructions were cut)", len(text)-cut)
	}
	return text, files, nil
}

// withInstructions adds project instructions to a system prompt.
func withInstructions(system, instructions string) string {
	if instructions == "" {
		return system
	}
	return strings.TrimSpace(system + "\n\n# Project instructions (AGENTS.md)\n\n" + instructions)
}
