-- retriage schema, version 5: the engine version each issue was reported on (taxonomy/versions.py reads it from
-- the body) and the label events of each issue as GitHub records them (`mine` stores them).
-- IF NOT EXISTS: running it again (a file whose schema_version was rewound) changes nothing.

CREATE TABLE IF NOT EXISTS issue_versions (
    repo        TEXT NOT NULL,
    number      INTEGER NOT NULL,
    engine      TEXT NOT NULL,      -- vllm | sglang | llama.cpp | tensorrt-llm
    version     TEXT NOT NULL,      -- normalised: 0.25.1, 0.6.4.dev12, 0.5.0rc1, b5432, 0.20.0rc3, main, unknown
    release     TEXT NOT NULL,      -- what reports group by: 0.25 (vLLM, SGLang, TensorRT-LLM), b5000-b5499 (llama.cpp
                                    -- builds in ranges), main, unknown
    sort_key    DOUBLE NOT NULL,    -- orders the releases of one engine (main and unknown sort last)
    role        TEXT NOT NULL,      -- reported (the version the reporter ran) | good (it worked there) | bad (broken there)
    source      TEXT NOT NULL,      -- the line it was read from, cut to 200 characters
    counted     BOOLEAN NOT NULL DEFAULT false,  -- the one row of the issue that per-release counts use: a
                                    -- regression report's bad version, else the reported one (a numbered release
                                    -- over main/unknown, then the newest); db/versions.mark_counted sets it
    PRIMARY KEY (repo, number, role, version)
);

CREATE TABLE IF NOT EXISTS label_events (
    repo        TEXT NOT NULL,
    number      INTEGER NOT NULL,
    event_id    BIGINT NOT NULL,    -- GitHub's id of the event
    label       TEXT NOT NULL,
    action      TEXT NOT NULL,      -- labeled | unlabeled
    actor       TEXT,               -- login, or NULL when GitHub gives none
    created_at  TIMESTAMP NOT NULL, -- UTC
    PRIMARY KEY (repo, number, event_id)
);
