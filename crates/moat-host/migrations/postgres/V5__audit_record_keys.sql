-- Each audit record's key, chosen by the gateway that queued it: a batch sent again after
-- its commit's acknowledgement was lost is recognised, and not written twice.
ALTER TABLE audit ADD COLUMN record_key TEXT;
CREATE UNIQUE INDEX audit_record_key ON audit (record_key);
