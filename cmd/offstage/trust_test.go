package main

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestARecordCannotNameAnyFileAsItsLog pins issue 34's third item: after
// "update tasks set log_path='/etc/shadow'", offstage tasks show and
// tasks follow printed that file. They read a log only where offstage
// writes logs, and say so otherwise.
func TestARecordCannotNameAnyFileAsItsLog(t *testing.T) {
	dir, _ := fixtureJournal(t)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("the secret\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "logs", "20261122-090000-aaaaaa"), 0o700)
	link := filepath.Join(dir, "logs", "20261122-090000-aaaaaa", "shell-1.log")
	os.Symlink(secret, link)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "journal.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	here, _ := os.Hostname()
	if _, err := db.Exec(`UPDATE hosts SET hostname = ?`, here); err != nil { // so that follow reads the log here
		t.Fatal(err)
	}
	const want = "this record's log is not where offstage writes logs"
	for _, path := range []string{"/etc/shadow", secret, link} {
		if _, err := db.Exec(`UPDATE tasks SET log_path = ? WHERE session_id = '20261122-090000-aaaaaa' AND id = 'shell:1'`, path); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		err := tasksCommand(t.Context(), []string{"--state-dir", dir, "--json=false", "show", "20261122-090000-aaaaaa/shell:1"}, &out, &errOut)
		if err != nil || !strings.Contains(out.String(), want) || strings.Contains(out.String(), "the secret") || strings.Contains(out.String(), "root:") {
			t.Errorf("tasks show with log_path %s = %v:\n%s", path, err, out.String())
		}
		out.Reset()
		err = tasksCommand(t.Context(), []string{"--state-dir", dir, "follow", "20261122-090000-aaaaaa/shell:1"}, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), want) || out.Len() > 0 {
			t.Errorf("tasks follow with log_path %s = %v, printing %q", path, err, out.String())
		}
	}
}
