-- Per-user downstream tokens of `oauth` servers, sealed by the gateway (ChaCha20-Poly1305
-- with a key the replicas share and the store never sees): a user who authorized through
-- one replica is known to every replica.
CREATE TABLE downstream_tokens (
    place      TEXT PRIMARY KEY,
    sealed     BYTEA       NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
