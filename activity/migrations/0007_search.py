"""Full-text search over what rows and replies keep (activity/search.py queries it).

A row is one document: its label, summary, error, input and output. A reply is cut into
blocks of about 8,000 characters, each one document, so that a reply streaming in re-indexes
only the block it grows, not everything it said before (re-indexing whole replies cost 30 ms
per chunk on PostgreSQL at 50 KB). A block ends at the first space or line break within 200
characters after its nominal end, so a word is never cut in two; 13 blocks (about 104,000
characters) of a reply are indexed.

SQLite: an FTS5 table, ``activity_search_fts``, and ``activity_search_doc``, which maps each
document's rowid to its kind, row or reply id, chat and block. Triggers on activity_toolactivity
and activity_message keep both in step with every write, by any path (the ORM, bulk writes,
cascades). The FTS5 table keeps its own copy of the text it indexed (at most the cuts below):
a contentless table would be smaller, but it removes a document only when given back exactly
the text indexed, and any mismatch corrupts it ("database disk image is malformed", raised by
the very write that triggered it): search must never be able to break a write.

PostgreSQL: ``activity_search_row`` and ``activity_search_reply`` hold each document's words
(a tsvector, GIN-indexed), made by triggers on the same two tables. A side table rather than
an expression index on activity_toolactivity: every UPDATE of a row that is not HOT (and its
version always changes an index) would compute the vector again, 10 ms for a 16 KB output.

Both: ASCII punctuation separates words, so ``tests/test_merge.py`` is found by ``test_merge``
(PostgreSQL's parser would otherwise keep a path, a URL or an e-mail address as one word), and
each row field is cut before indexing (a tsvector must stay under 1 MB, whatever the settings).

Django's SQLite schema editor rebuilds a table for most ALTERs and drops its triggers with it:
a later migration that alters activity_toolactivity or activity_message on SQLite must create
``SQLITE_TRIGGERS`` again and rebuild the index (tests/test_search.py checks they exist).
"""

from django.db import migrations

SHORT, CONTENT = 2_000, 60_000  # characters of each row field that are indexed
ROW_FIELDS = [  # (source column, FTS column, cut)
    ("agent_label", "label", SHORT),
    ("agent_summary", "summary", SHORT),
    ("error_message", "error", SHORT),
    ("agent_input", "input", CONTENT),
    ("agent_output", "output", CONTENT),
]
BLOCK, BLOCKS, SEEK = 8_000, 13, 200  # reply block size, blocks indexed, how far a space is sought
FINISHED = "('completed', 'failed', 'cancelled')"


def _indexed(row: str, source: str, cut: int, cutter: str = "substr({0}, 1, {1})") -> str:
    """What is indexed of a row field. An output streams in while its call runs: it is indexed
    once the call has finished, so each chunk does not index the whole output again."""
    value = cutter.format(f"{row}.{source}", cut)
    if source == "agent_output":
        return f"CASE WHEN {row}.status IN {FINISHED} THEN {value} END"
    return value


UPDATED_COLUMNS = ", ".join([*(source for source, _, _ in ROW_FIELDS), "status"])


# --- SQLite --------------------------------------------------------------------------------


def _sqlite_start(md: str, k: str) -> str:
    """Where block ``k`` of ``md`` begins, in bytes from 1: past the first blank after k*BLOCK.

    Bytes, not characters: SQLite finds a character position by walking the text from its
    start, a byte position at once. A space or a line feed never occurs inside a UTF-8
    character, so a block cut there is whole text.
    """
    seek = f"substr(CAST({md} AS BLOB), {k} * {BLOCK} + 1, {SEEK})"
    space, newline = f"instr({seek}, X'20')", f"instr({seek}, X'0A')"
    blank = (
        f"CASE WHEN {space} = 0 THEN {newline} WHEN {newline} = 0 THEN {space} "
        f"ELSE min({space}, {newline}) END"
    )
    return f"(CASE WHEN {k} = 0 THEN 1 ELSE {k} * {BLOCK} + 1 + {blank} END)"


def _sqlite_block(md: str, k: str) -> str:
    start, end = _sqlite_start(md, k), _sqlite_start(md, f"({k} + 1)")
    return f"CAST(substr(CAST({md} AS BLOB), {start}, {end} - {start}) AS TEXT)"


def _sqlite_stale(k: str) -> str:
    """Whether block ``k`` may differ between old.markdown and new.markdown.

    When the reply only grew, a block whose bytes (and the blank sought after them) all lie in
    the old text is as it was: only the last block or two are re-indexed.
    """
    old_bytes = "length(CAST(old.markdown AS BLOB))"
    grew = f"substr(CAST(new.markdown AS BLOB), 1, {old_bytes}) = CAST(old.markdown AS BLOB)"
    return f"NOT ({grew} AND ({k} + 1) * {BLOCK} + {SEEK} <= {old_bytes})"


def _cut(row: str) -> str:
    return ", ".join(_indexed(row, source, cut) for source, _, cut in ROW_FIELDS)


ROW_COLUMNS = ", ".join(column for _, column, _ in ROW_FIELDS)
CHANGED = " OR ".join(
    f"{_indexed('old', source, cut)} IS NOT {_indexed('new', source, cut)}"
    for source, _, cut in ROW_FIELDS
)
ROW_DOC = "(SELECT id FROM activity_search_doc WHERE ref = {row}.id AND kind = 'row')"
NUMBERS = " UNION ALL ".join(f"SELECT {k} AS k" for k in range(BLOCKS))
REPLY_DOCS = "FROM activity_search_doc AS d WHERE d.ref = {row}.id AND d.kind = 'reply'"
SQLITE_TABLES = [
    """CREATE TABLE activity_search_doc (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        ref CHAR(32) NOT NULL,
        chat_id CHAR(32) NOT NULL,
        block INTEGER NOT NULL DEFAULT 0,
        UNIQUE (ref, kind, block)
    )""",
    "CREATE INDEX activity_search_doc_chat ON activity_search_doc (chat_id)",
    f"""CREATE VIRTUAL TABLE activity_search_fts USING fts5(
        {ROW_COLUMNS}, reply, tokenize='unicode61 remove_diacritics 2'
    )""",
]

SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER activity_search_row_insert AFTER INSERT ON activity_toolactivity BEGIN
        INSERT INTO activity_search_doc (kind, ref, chat_id) VALUES ('row', new.id, new.chat_id);
        INSERT INTO activity_search_fts (rowid, {ROW_COLUMNS})
            VALUES ({ROW_DOC.format(row="new")}, {_cut("new")});
    END""",
    f"""CREATE TRIGGER activity_search_row_update
    AFTER UPDATE OF {UPDATED_COLUMNS} ON activity_toolactivity
    WHEN {CHANGED} BEGIN
        UPDATE activity_search_fts SET ({ROW_COLUMNS}) = ({_cut("new")})
            WHERE rowid = {ROW_DOC.format(row="new")};
    END""",
    f"""CREATE TRIGGER activity_search_row_delete AFTER DELETE ON activity_toolactivity BEGIN
        DELETE FROM activity_search_fts WHERE rowid = {ROW_DOC.format(row="old")};
        DELETE FROM activity_search_doc WHERE ref = old.id AND kind = 'row';
    END""",
    f"""CREATE TRIGGER activity_search_reply_insert AFTER INSERT ON activity_message BEGIN
        INSERT INTO activity_search_doc (kind, ref, chat_id, block)
            SELECT 'reply', new.id, new.chat_id, b.k FROM ({NUMBERS}) AS b
            WHERE {_sqlite_block("new.markdown", "b.k")} != '';
        INSERT INTO activity_search_fts (rowid, reply)
            SELECT d.id, {_sqlite_block("new.markdown", "d.block")} {REPLY_DOCS.format(row="new")};
    END""",
    # The blocks that may have changed leave the index and are cut again from the new text.
    f"""CREATE TRIGGER activity_search_reply_update AFTER UPDATE OF markdown ON activity_message
    WHEN old.markdown IS NOT new.markdown BEGIN
        DELETE FROM activity_search_fts WHERE rowid IN (
            SELECT d.id {REPLY_DOCS.format(row="old")} AND {_sqlite_stale("d.block")}
        );
        DELETE FROM activity_search_doc
            WHERE ref = old.id AND kind = 'reply' AND {_sqlite_stale("block")};
        INSERT INTO activity_search_doc (kind, ref, chat_id, block)
            SELECT 'reply', new.id, new.chat_id, b.k FROM ({NUMBERS}) AS b
            WHERE {_sqlite_stale("b.k")} AND {_sqlite_block("new.markdown", "b.k")} != '';
        INSERT INTO activity_search_fts (rowid, reply)
            SELECT d.id, {_sqlite_block("new.markdown", "d.block")}
            {REPLY_DOCS.format(row="new")} AND {_sqlite_stale("d.block")};
    END""",
    f"""CREATE TRIGGER activity_search_reply_delete AFTER DELETE ON activity_message BEGIN
        DELETE FROM activity_search_fts WHERE rowid IN (SELECT d.id {REPLY_DOCS.format(row="old")});
        DELETE FROM activity_search_doc WHERE ref = old.id AND kind = 'reply';
    END""",
]

SQLITE_BACKFILL = [
    "INSERT INTO activity_search_doc (kind, ref, chat_id) "
    "SELECT 'row', id, chat_id FROM activity_toolactivity",
    f"""INSERT INTO activity_search_fts (rowid, {ROW_COLUMNS})
        SELECT d.id, {_cut("t")} FROM activity_search_doc AS d
        JOIN activity_toolactivity AS t ON t.id = d.ref AND d.kind = 'row'""",
    f"""INSERT INTO activity_search_doc (kind, ref, chat_id, block)
        SELECT 'reply', m.id, m.chat_id, b.k FROM activity_message AS m, ({NUMBERS}) AS b
        WHERE {_sqlite_block("m.markdown", "b.k")} != ''""",
    f"""INSERT INTO activity_search_fts (rowid, reply)
        SELECT d.id, {_sqlite_block("m.markdown", "d.block")} FROM activity_search_doc AS d
        JOIN activity_message AS m ON m.id = d.ref AND d.kind = 'reply'""",
]

SQLITE_DROP = [
    *(
        f"DROP TRIGGER IF EXISTS activity_search_{kind}_{event}"
        for kind in ("row", "reply")
        for event in ("insert", "update", "delete")
    ),
    "DROP TABLE IF EXISTS activity_search_fts",
    "DROP TABLE IF EXISTS activity_search_doc",
]


# --- PostgreSQL ----------------------------------------------------------------------------



PG_CUT = "left(coalesce({0}, ''), {1})"


def _row_words(row: str) -> str:
    """A row's weighted words: its label counts most, then its summary and error, then the rest."""
    return " || ".join(
        f"setweight(activity_search_words(coalesce({_indexed(row, source, cut, PG_CUT)}, '')),"
        f" '{weight}')"
        for (source, _, cut), weight in zip(ROW_FIELDS, "ABBCD", strict=True)
    )


def _row_title(row: str) -> str:
    return f"activity_search_words(left(coalesce({row}.agent_label, ''), {SHORT}))"


ROW_CHANGED = " OR ".join(
    f"{_indexed('OLD', source, cut, PG_CUT)} IS DISTINCT FROM {_indexed('NEW', source, cut, PG_CUT)}"
    for source, _, cut in ROW_FIELDS
)

POSTGRES_INSTALL = [
    # (regexp_replace is ten times faster than translate() with the 32 signs.)
    """CREATE FUNCTION activity_search_words(body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT to_tsvector('simple'::regconfig, regexp_replace(body, '[[:punct:]]', ' ', 'g'))
    $$""",
    # --- rows: one document each, (re)made only when a searched field changes
    """CREATE TABLE activity_search_row (
        tool_id uuid PRIMARY KEY,
        chat_id uuid NOT NULL,
        title tsvector NOT NULL,
        words tsvector NOT NULL
    )""",
    "CREATE INDEX activity_search_row_words ON activity_search_row USING gin (words)",
    f"""CREATE FUNCTION activity_search_row_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            DELETE FROM activity_search_row WHERE tool_id = OLD.id;
            RETURN NULL;
        END IF;
        INSERT INTO activity_search_row (tool_id, chat_id, title, words)
        VALUES (NEW.id, NEW.chat_id, {_row_title("NEW")}, {_row_words("NEW")})
        ON CONFLICT (tool_id) DO UPDATE SET title = excluded.title, words = excluded.words;
        RETURN NULL;
    END
    $$""",
    """CREATE TRIGGER activity_search_row_insert AFTER INSERT ON activity_toolactivity
    FOR EACH ROW EXECUTE FUNCTION activity_search_row_sync()""",
    f"""CREATE TRIGGER activity_search_row_update
    AFTER UPDATE OF {UPDATED_COLUMNS} ON activity_toolactivity
    FOR EACH ROW WHEN ({ROW_CHANGED}) EXECUTE FUNCTION activity_search_row_sync()""",
    """CREATE TRIGGER activity_search_row_delete AFTER DELETE ON activity_toolactivity
    FOR EACH ROW EXECUTE FUNCTION activity_search_row_sync()""",
    # --- replies: a document per block
    # Bytes, as on SQLite: a character position is found by walking the text from its start.
    # Where no blank is near, the cut moves past continuation bytes to the next character.
    f"""CREATE FUNCTION activity_search_block_start(bytes bytea, k integer) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
    DECLARE
        pos integer := k * {BLOCK};
        seek bytea;
        blank integer;
    BEGIN
        IF k = 0 THEN
            RETURN 1;
        ELSIF pos >= length(bytes) THEN
            RETURN length(bytes) + 1;
        END IF;
        seek := substring(bytes FROM pos + 1 FOR {SEEK});
        blank := least(nullif(position('\\x20'::bytea IN seek), 0),
                       nullif(position('\\x0a'::bytea IN seek), 0));
        IF blank IS NOT NULL THEN
            RETURN pos + blank + 1;
        END IF;
        WHILE pos < length(bytes) AND get_byte(bytes, pos) BETWEEN 128 AND 191 LOOP
            pos := pos + 1;
        END LOOP;
        RETURN pos + 1;
    END
    $$""",
    """CREATE FUNCTION activity_search_block(bytes bytea, k integer) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
    DECLARE
        lo integer := activity_search_block_start(bytes, k);
        hi integer := activity_search_block_start(bytes, k + 1);
    BEGIN
        RETURN convert_from(substring(bytes FROM lo FOR hi - lo), 'UTF8');
    END
    $$""",
    """CREATE TABLE activity_search_reply (
        message_id uuid NOT NULL,
        block smallint NOT NULL,
        chat_id uuid NOT NULL,
        words tsvector NOT NULL,
        PRIMARY KEY (message_id, block)
    )""",
    "CREATE INDEX activity_search_reply_words ON activity_search_reply USING gin (words)",
    # When the reply only grew, the blocks wholly inside the old text are left as they are.
    f"""CREATE FUNCTION activity_search_reply_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        bytes bytea;
        kept integer := 0;
        body text;
    BEGIN
        IF TG_OP = 'DELETE' THEN
            DELETE FROM activity_search_reply WHERE message_id = OLD.id;
            RETURN NULL;
        END IF;
        bytes := convert_to(NEW.markdown, 'UTF8');
        IF TG_OP = 'UPDATE' AND starts_with(NEW.markdown, OLD.markdown) THEN
            kept := octet_length(convert_to(OLD.markdown, 'UTF8'));
        END IF;
        FOR k IN 0..{BLOCKS - 1} LOOP
            CONTINUE WHEN (k + 1) * {BLOCK} + {SEEK} <= kept;
            body := activity_search_block(bytes, k);
            IF body = '' THEN
                DELETE FROM activity_search_reply WHERE message_id = NEW.id AND block = k;
            ELSE
                INSERT INTO activity_search_reply AS r (message_id, block, chat_id, words)
                VALUES (NEW.id, k, NEW.chat_id, setweight(activity_search_words(body), 'C'))
                ON CONFLICT (message_id, block) DO UPDATE SET words = excluded.words
                WHERE r.words IS DISTINCT FROM excluded.words;
            END IF;
        END LOOP;
        RETURN NULL;
    END
    $$""",
    """CREATE TRIGGER activity_search_reply_insert AFTER INSERT ON activity_message
    FOR EACH ROW EXECUTE FUNCTION activity_search_reply_sync()""",
    """CREATE TRIGGER activity_search_reply_update AFTER UPDATE OF markdown ON activity_message
    FOR EACH ROW WHEN (OLD.markdown IS DISTINCT FROM NEW.markdown)
    EXECUTE FUNCTION activity_search_reply_sync()""",
    """CREATE TRIGGER activity_search_reply_delete AFTER DELETE ON activity_message
    FOR EACH ROW EXECUTE FUNCTION activity_search_reply_sync()""",
    # Django's flush (TransactionTestCase, `manage.py flush`) truncates the model tables.
    """CREATE FUNCTION activity_search_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_TABLE_NAME = 'activity_toolactivity' THEN
            TRUNCATE activity_search_row;
        ELSE
            TRUNCATE activity_search_reply;
        END IF;
        RETURN NULL;
    END
    $$""",
    """CREATE TRIGGER activity_search_row_truncate AFTER TRUNCATE ON activity_toolactivity
    FOR EACH STATEMENT EXECUTE FUNCTION activity_search_truncate()""",
    """CREATE TRIGGER activity_search_reply_truncate AFTER TRUNCATE ON activity_message
    FOR EACH STATEMENT EXECUTE FUNCTION activity_search_truncate()""",
]
POSTGRES_BACKFILL = [
    f"""INSERT INTO activity_search_row (tool_id, chat_id, title, words)
    SELECT t.id, t.chat_id, {_row_title("t")}, {_row_words("t")} FROM activity_toolactivity AS t""",
    f"""INSERT INTO activity_search_reply (message_id, block, chat_id, words)
    SELECT m.id, b.k, m.chat_id, setweight(activity_search_words(b.body), 'C')
    FROM activity_message AS m, LATERAL (
        SELECT k, activity_search_block(convert_to(m.markdown, 'UTF8'), k) AS body
        FROM generate_series(0, {BLOCKS - 1}) AS k
    ) AS b
    WHERE b.body != ''""",
]
POSTGRES_DROP = [
    *(
        f"DROP TRIGGER IF EXISTS activity_search_{kind}_{event} ON {table}"
        for kind, table in [("row", "activity_toolactivity"), ("reply", "activity_message")]
        for event in ("insert", "update", "delete", "truncate")
    ),
    "DROP TABLE IF EXISTS activity_search_row",
    "DROP TABLE IF EXISTS activity_search_reply",
    "DROP FUNCTION IF EXISTS activity_search_truncate()",
    "DROP FUNCTION IF EXISTS activity_search_row_sync()",
    "DROP FUNCTION IF EXISTS activity_search_reply_sync()",
    "DROP FUNCTION IF EXISTS activity_search_block(bytea, integer)",
    "DROP FUNCTION IF EXISTS activity_search_block_start(bytea, integer)",
    "DROP FUNCTION IF EXISTS activity_search_words(text)",
]


def install(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for sql in [*SQLITE_TABLES, *SQLITE_TRIGGERS, *SQLITE_BACKFILL]:
            schema_editor.execute(sql)
    elif vendor == "postgresql":
        for sql in [*POSTGRES_INSTALL, *POSTGRES_BACKFILL]:
            schema_editor.execute(sql)


def uninstall(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for sql in SQLITE_DROP:
            schema_editor.execute(sql)
    elif vendor == "postgresql":
        for sql in POSTGRES_DROP:
            schema_editor.execute(sql)


class Migration(migrations.Migration):

    dependencies = [
        ("activity", "0006_comments"),
    ]

    operations = [
        migrations.RunPython(install, uninstall),
    ]
