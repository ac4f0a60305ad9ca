-- retriage schema, version 1. Forward-only: later versions add files 002_*.sql, 003_*.sql, ...

CREATE TABLE issues (
    repo               TEXT NOT NULL,          -- owner/name, e.g. vllm-project/vllm
    number             INTEGER NOT NULL,
    title              TEXT,
    body               TEXT,
    state              TEXT,                   -- open | closed
    labels             TEXT[],                 -- label names
    author             TEXT,
    author_association TEXT,
    created_at         TIMESTAMP,              -- UTC
    updated_at         TIMESTAMP,              -- UTC
    closed_at          TIMESTAMP,              -- UTC
    comments           INTEGER,                -- comment count as GitHub reports it
    is_pull_request    BOOLEAN NOT NULL DEFAULT FALSE,
    html_url           TEXT,
    PRIMARY KEY (repo, number)
);

CREATE TABLE comments (
    repo          TEXT NOT NULL,
    issue_number  INTEGER NOT NULL,
    id            BIGINT NOT NULL,
    author        TEXT,
    body          TEXT,
    created_at    TIMESTAMP,
    updated_at    TIMESTAMP,
    html_url      TEXT,
    PRIMARY KEY (repo, id)
);

-- Pull requests that say they fix an issue ("fixes #N").
CREATE TABLE issue_links (
    repo          TEXT NOT NULL,
    pr_number     INTEGER NOT NULL,
    issue_repo    TEXT NOT NULL,
    issue_number  INTEGER NOT NULL,
    kind          TEXT NOT NULL DEFAULT 'fixes',
    PRIMARY KEY (repo, pr_number, issue_repo, issue_number)
);

CREATE TABLE predictions (
    repo                  TEXT NOT NULL,
    number                INTEGER NOT NULL,
    re_class              TEXT NOT NULL,       -- best guess, also when abstained
    component             TEXT NOT NULL,
    confidence            DOUBLE,              -- confidence of re_class
    component_confidence  DOUBLE,
    abstained             BOOLEAN NOT NULL DEFAULT FALSE,   -- confidence below the abstain threshold: 'unsure'
    known_fixes           TEXT[],              -- fix tags matched by the triage rules
    model_version         TEXT NOT NULL,
    labeled_at            TIMESTAMP NOT NULL,
    PRIMARY KEY (repo, number, model_version)
);

-- Labels written by people (taxonomy/labels/*.jsonl), loaded for lookup and evaluation.
CREATE TABLE gold_labels (
    repo       TEXT NOT NULL,
    number     INTEGER NOT NULL,
    re_class   TEXT NOT NULL,
    component  TEXT NOT NULL,
    known_fix  TEXT NOT NULL,
    reason     TEXT,
    labeler    TEXT,
    PRIMARY KEY (repo, number)
);

-- Embedding cache keyed by the hash of the prepared text and the embedding model.
CREATE TABLE embeddings (
    text_hash  TEXT NOT NULL,
    model      TEXT NOT NULL,
    vector     FLOAT[384] NOT NULL,
    PRIMARY KEY (text_hash, model)
);

CREATE TABLE issue_embeddings (
    repo       TEXT NOT NULL,
    number     INTEGER NOT NULL,
    model      TEXT NOT NULL,
    text_hash  TEXT NOT NULL,
    PRIMARY KEY (repo, number, model)
);

CREATE TABLE sync_state (
    repo               TEXT NOT NULL,
    resource           TEXT NOT NULL,         -- issues | comments
    cursor_updated_at  TIMESTAMP,             -- highest updated_at stored (UTC)
    etag               TEXT,                  -- ETag of the first page, for If-None-Match
    last_run_at        TIMESTAMP,
    last_status        TEXT,
    PRIMARY KEY (repo, resource)
);
