-- retriage schema, version 3: no secret in stored error texts. Texts written before it could hold a token a
-- server echoed back (cut, so not always whole): every token-shaped run in sync_state.last_status is masked.
-- New texts are masked before they are written (retriage.core.secrets).

UPDATE sync_state
SET last_status = regexp_replace(
    last_status,
    '(gh[pousr]\\?_|github\\?_pat\\?_|hf\\?_|sk-)[A-Za-z0-9_\\-]{8,}|(AKIA|ASIA)[0-9A-Z]{8,}',
    '***', 'g')
WHERE last_status IS NOT NULL;
