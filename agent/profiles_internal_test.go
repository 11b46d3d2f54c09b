package agent

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestEveryFrontMatterKeyIsKnown: a key the parser applies but the list
// of known keys lacks was warned about as "unknown … is ignored" while it
// was applied (sandbox and sandbox_network were).
func TestEveryFrontMatterKeyIsKnown(t *testing.T) {
	typ := reflect.TypeFor[frontMatter]()
	for i := range typ.NumField() {
		tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
		if tag != "" && tag != "-" && !slices.Contains(profileKeys, tag) {
			t.Errorf("front matter key %q is parsed but not in profileKeys: it would be warned about as unknown", tag)
		}
	}
}
