package proc

import (
	"fmt"
	"os"
)

// logFile writes output to a file up to a cap. Past the cap it drops the
// rest, counting it, and on close appends one line saying how much was not
// logged, so a reader of the file knows it was cut. Write errors (a full
// disk) stop logging the same way. Not safe for concurrent use.
type logFile struct {
	f       *os.File
	max     int64 // cap on bytes of output written
	written int64
	cut     int64 // bytes not written
	err     error // the first write error, which stopped logging
}

func openLog(path string, max int64) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return &logFile{f: f, max: max}, nil
}

func (l *logFile) write(b []byte) {
	if l.err != nil || l.written >= l.max {
		l.cut += int64(len(b))
		return
	}
	keep := b[:min(int64(len(b)), l.max-l.written)]
	n, err := l.f.Write(keep)
	l.written += int64(n)
	l.cut += int64(len(b) - n)
	if err != nil {
		l.err = err
	}
}

func (l *logFile) close() {
	if l.cut > 0 {
		why := fmt.Sprintf("the log reached its cap of %d bytes", l.max)
		if l.err != nil {
			why = "writing failed: " + l.err.Error()
		}
		fmt.Fprintf(l.f, "\n[offstage: log cut: %d more bytes of output were not logged; %s]\n", l.cut, why)
	}
	l.f.Close()
}
