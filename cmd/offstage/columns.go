package main

import (
	"io"
	"strings"
)

// writeColumns prints rows as aligned columns: every cell but a row's last
// is padded to its column's width and two spaces. Widths are counted in a
// terminal's columns (see columns), on the cells as given; style may then
// dress a cell (colour it) without moving the columns, as it would if the
// escape codes were counted, as text/tabwriter counts them.
func writeColumns(w io.Writer, rows [][]string, style func(row, col int, cell string) string) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], columns(c))
		}
	}
	var b strings.Builder
	for ri, r := range rows {
		b.Reset()
		for i, c := range r {
			if style != nil {
				b.WriteString(style(ri, i, c))
			} else {
				b.WriteString(c)
			}
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-columns(c)+2))
			}
		}
		b.WriteByte('\n')
		io.WriteString(w, b.String())
	}
}
