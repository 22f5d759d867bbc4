-- The shared store's first schema: the same tables the SQLite files hold, plus rate buckets.
CREATE TABLE tool_pins (
    server_id TEXT NOT NULL,
    identity TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    exposed_name TEXT NOT NULL,
    hash TEXT NOT NULL,
    definition TEXT NOT NULL,
    pinned_at BIGINT NOT NULL,
    pending_hash TEXT,
    pending_definition TEXT,
    pending_seen_at BIGINT,
    PRIMARY KEY (server_id, tool)
);
CREATE TABLE server_pins (
    origin TEXT NOT NULL,
    server TEXT NOT NULL,
    hash TEXT,
    spec TEXT,
    source TEXT,
    pinned_at BIGINT,
    pending_hash TEXT,
    pending_spec TEXT,
    pending_source TEXT,
    pending_seen_at BIGINT,
    PRIMARY KEY (origin, server)
);
CREATE TABLE consent_always (
    tool TEXT PRIMARY KEY,
    decided_at BIGINT NOT NULL
);
CREATE TABLE consent_always_user (
    "user" TEXT NOT NULL,
    tool TEXT NOT NULL,
    decided_at BIGINT NOT NULL,
    PRIMARY KEY ("user", tool)
);
-- Bumped by every write, so a gateway polls one row to learn that something changed.
CREATE TABLE generation (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    value BIGINT NOT NULL
);
INSERT INTO generation (id, value) VALUES (0, 0);
-- Token buckets of rate limits, shared by every gateway. `limit_key` names the configured
-- limit (its label and rate), so a changed limit starts a new bucket.
CREATE TABLE rate_buckets (
    limit_key TEXT NOT NULL,
    bucket TEXT NOT NULL,
    tokens DOUBLE PRECISION NOT NULL,
    at_us BIGINT NOT NULL,
    PRIMARY KEY (limit_key, bucket)
);
