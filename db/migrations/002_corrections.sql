-- retriage schema, version 2: label corrections recorded by `retriage relabel` (the newest per issue wins;
-- the older ones stay as history). `show` and `list` show them over the model's prediction, `train` learns them.

CREATE TABLE corrections (
    repo          TEXT NOT NULL,
    number        INTEGER NOT NULL,
    re_class      TEXT NOT NULL,          -- RE.1 .. RE.4 | none (taxonomy/taxonomy.toml)
    component     TEXT NOT NULL,
    known_fix     TEXT NOT NULL,          -- a fix tag or none
    reason        TEXT NOT NULL,          -- why, in the corrector's words
    corrected_by  TEXT NOT NULL,          -- --by, else $USER, else git config user.name
    corrected_at  TIMESTAMP NOT NULL,     -- UTC
    was           TEXT,                   -- what was shown before: "RE.1 / operators / none (prediction m-...)"
    PRIMARY KEY (repo, number, corrected_at)
);
