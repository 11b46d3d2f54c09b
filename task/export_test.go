package task

// Test knobs: visible to this package's tests only.

// CutChars exposes cutChars.
var CutChars = cutChars

// HeldInAll returns the length of the id-ordered slice, evicted entries
// not yet compacted away included.
func HeldInAll(tb *Table) int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return len(tb.all)
}
