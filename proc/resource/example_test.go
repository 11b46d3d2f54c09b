package resource_test

import (
	"fmt"

	"github.com/offstage/offstage/proc/resource"
)

// Limits from text, as a flag or a config file spells them.
func ExampleParseSize() {
	mem, err := resource.ParseSize("1.5G")
	if err != nil {
		panic(err)
	}
	l := resource.Limits{Memory: mem, Pids: 256}
	fmt.Println(resource.FormatSize(l.Memory), l.Validate())
	// Output:
	// 1.5 GiB <nil>
}
