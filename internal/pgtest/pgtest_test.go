package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/offstage/offstage/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAServerStopsAndStartsAgain: the private server answers, keeps its
// data over a stop and a start on the same port, and a new database is
// empty.
func TestAServerStopsAndStartsAgain(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.NewDatabase(t)
	exec := func(sql string) error {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), sql)
		return err
	}
	if err := exec("CREATE TABLE kept (n integer)"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := exec("SELECT 1"); err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := exec("INSERT INTO kept VALUES (1)"); err != nil {
		t.Errorf("the table did not survive the restart: %v", err)
	}
}
