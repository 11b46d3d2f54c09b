-- A journal as schema version 1 wrote it, with one session, one task and
-- one message: the fixture of the migration test.
CREATE TABLE hosts (
	id TEXT PRIMARY KEY,
	hostname TEXT NOT NULL,
	pid INTEGER NOT NULL,
	start INTEGER NOT NULL,
	started_at INTEGER NOT NULL,
	version TEXT NOT NULL
);
CREATE TABLE sessions (
	id TEXT PRIMARY KEY,
	host_id TEXT NOT NULL,
	surface TEXT NOT NULL,
	cwd TEXT NOT NULL,
	model TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at INTEGER
);
CREATE TABLE messages (
	session_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	body BLOB NOT NULL,
	PRIMARY KEY (session_id, seq)
);
CREATE TABLE tasks (
	session_id TEXT NOT NULL,
	id TEXT NOT NULL,
	kind TEXT NOT NULL,
	label TEXT NOT NULL,
	owner TEXT NOT NULL,
	state TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	started_at INTEGER,
	finished_at INTEGER,
	exit_code INTEGER,
	result TEXT NOT NULL DEFAULT '',
	error TEXT NOT NULL DEFAULT '',
	delivered INTEGER NOT NULL DEFAULT 0,
	log_path TEXT NOT NULL DEFAULT '',
	pid INTEGER NOT NULL DEFAULT 0,
	pid_start INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, id)
);
INSERT INTO hosts VALUES ('h1', 'old-machine', 4242, 777, 1790000000000000000, 'v0.1.0');
INSERT INTO sessions VALUES ('s1', 'h1', 'run', '/src', 'scripted', 1790000000000000000, 1790000060000000000);
INSERT INTO tasks (session_id, id, kind, label, owner, state, created_at, started_at, finished_at, exit_code, result, delivered)
	VALUES ('s1', 'shell:1', 'shell', 'make test', '', 'completed', 1790000001000000000, 1790000001000000000, 1790000031000000000, 0, 'exit status 0 after 30s', 1);
INSERT INTO messages VALUES ('s1', 1, '{"role":"user","content":[{"type":"text","text":"run the tests"}]}');
PRAGMA user_version = 1;
