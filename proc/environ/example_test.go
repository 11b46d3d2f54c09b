package environ_test

import (
	"fmt"

	"github.com/offstage/offstage/proc/environ"
)

// A policy that keeps one token the default rule would withhold, and
// drops a family of variables it would pass.
func ExamplePolicy() {
	env := []string{
		"PATH=/usr/bin",
		"GITHUB_TOKEN=ghp_0123456789abcdef",
		"DATABASE_URL=postgres://app:pw@db/app",
		"CORP_VPN=on",
	}
	p := environ.Policy{Keep: []string{"GITHUB_TOKEN"}, Drop: []string{"CORP_*"}}
	kept, withheld := p.Apply(env)
	fmt.Println(kept)
	fmt.Println(withheld)
	// Output:
	// [PATH=/usr/bin GITHUB_TOKEN=ghp_0123456789abcdef]
	// [DATABASE_URL CORP_VPN]
}
