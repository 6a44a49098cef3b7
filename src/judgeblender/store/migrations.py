"""Schema migrations, applied in order; PRAGMA user_version records how many have run."""

MIGRATIONS: list[str] = [
    # 1: every LLM call, keyed by what determines its answer.
    """
    CREATE TABLE calls (
        key TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        model TEXT NOT NULL,
        model_identity TEXT NOT NULL,
        request TEXT NOT NULL,
        raw_output TEXT NOT NULL,
        parsed TEXT,
        probs TEXT,
        choice_mass REAL,
        tokens_in INTEGER,
        tokens_out INTEGER,
        latency_s REAL,
        created_at TEXT NOT NULL,
        extra TEXT
    );
    CREATE TABLE file_hashes (
        path TEXT NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        PRIMARY KEY (path, size, mtime_ns)
    );
    """,
    # 2: final per-pair judgments of each judge, so blends can be recomputed without calls.
    """
    CREATE TABLE judgments (
        judge_id TEXT NOT NULL,
        qid TEXT NOT NULL,
        docid TEXT NOT NULL,
        label INTEGER,
        probs TEXT,
        expected REAL,
        invalid_reason TEXT,
        details TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (judge_id, qid, docid)
    );
    """,
    # 3: scorer outputs (embedding vectors, cross-encoder scores) keyed by model and text, so a
    # re-run or another jury containing the same scorer encodes nothing twice.
    """
    CREATE TABLE vectors (
        model TEXT NOT NULL,
        text_sha256 TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (model, text_sha256)
    );
    """,
]
