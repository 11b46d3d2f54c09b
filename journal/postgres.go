package journal

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// OpenPostgres connects to the PostgreSQL journal at dsn (a postgres://
// URL or a key=value connection string) and brings its schema up to date,
// under an advisory lock, so instances starting at once migrate it once;
// ctx bounds the whole of it, the wait for that lock included.
// The journal is a Leaser: the instances sharing it hold leases, and one
// of them orphans the tasks of an instance whose lease ran out. Errors
// and Path never show the password.
func OpenPostgres(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("journal: the PostgreSQL address cannot be read (%s)", scrub(err.Error(), dsn))
	}
	where := fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(8)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("journal %s cannot be reached (%s): check the address and that the server runs", where, scrub(err.Error(), dsn))
	}
	s := newDB(db, where, postgresDialect)
	s.listen = cfg
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func init() { postgresDialect.pipeline = pipeline }

// pipeline sends a batch's statements in one transaction as one pgx
// batch: one round trip to the server instead of one per statement.
func pipeline(ctx context.Context, db *sql.DB, stmts []stmt) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		pc := driverConn.(*stdlib.Conn).Conn()
		tx, err := pc.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		b := &pgx.Batch{}
		for _, q := range stmts {
			b.Queue(q.query, q.args...)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// IsPostgres reports whether a --journal value names a PostgreSQL
// server rather than a SQLite file.
func IsPostgres(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") || strings.Contains(s, "host=")
}

// scrub removes the password of dsn from a message.
func scrub(msg, dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	if cfg, err := pgx.ParseConfig(dsn); err == nil && cfg.Password != "" {
		msg = strings.ReplaceAll(msg, cfg.Password, "xxxxx")
	}
	return msg
}
