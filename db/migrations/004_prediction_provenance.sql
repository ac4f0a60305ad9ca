-- retriage schema, version 4: how each stored prediction was made (classifier/decision.py), beside the predictions
-- table rather than in it, so that the predictions table keeps its ten columns (scripts that insert into it by
-- position keep working). `label` writes one row per prediction it stores, in the same transaction; a prediction
-- stored before this version, or by a script, has none (`show` and `list` then say the provenance is not recorded).
-- IF NOT EXISTS: running it again (a file whose schema_version was rewound) changes nothing.

CREATE TABLE IF NOT EXISTS prediction_provenance (
    repo           TEXT NOT NULL,
    number         INTEGER NOT NULL,
    model_version  TEXT NOT NULL,
    labeled_at     TIMESTAMP NOT NULL,   -- the prediction's: a row describes that prediction only
    made_by        TEXT,                 -- "model m-… · MiniLM" | "model m-… · fast path (static MiniLM)", then
                                         -- "+ rule mixed-GPU class", "+ fix … left out beside none", ...
    note           TEXT,                 -- one line: why a resource fix is missing or worth checking beside none
    PRIMARY KEY (repo, number, model_version)
);
