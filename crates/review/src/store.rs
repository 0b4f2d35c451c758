//! The review database of a workspace: one SQLite file (bundled SQLite, WAL journal,
//! `synchronous = FULL`) with each case's review state and an append-only log of
//! corrections. Every call commits before it returns, so an edit the caller was told about
//! survives a killed process or a power cut; readers and a second writer wait for each other
//! (busy timeout) instead of failing or corrupting the file.
//!
//! Schema versions are kept in `PRAGMA user_version`; a database from an older Keyslice is
//! migrated in one transaction, one from a newer Keyslice is refused with a message.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

/// The schema this build writes.
pub const SCHEMA_VERSION: i32 = 2;

/// Why the review database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused.
    #[error("{path}: {detail}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// The file was written by a newer Keyslice.
    #[error(
        "{path}: written by a newer Keyslice (review schema {found}, this build knows {SCHEMA_VERSION})"
    )]
    Newer {
        /// The database file.
        path: PathBuf,
        /// Its schema version.
        found: i32,
    },
    /// The file is not a Keyslice review database (or is damaged).
    #[error("{path}: not a usable review database: {detail}")]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A value does not fit its field.
    #[error("{0}")]
    Invalid(String),
    /// The workspace is read-only (its folder or database may not be written): it is opened
    /// to browse and export, and a change is refused.
    #[error(
        "{path}: the workspace is read-only; it can be browsed and exported, but no review can be saved in it"
    )]
    ReadOnly {
        /// The database file.
        path: PathBuf,
    },
}

impl StoreError {
    /// What the user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Sqlite { .. } => {
                "check that the workspace folder is writable and the disk has space; if another \
                 Keyslice holds it for long, close that one"
            }
            Self::Newer { .. } => "open this workspace with the newer Keyslice, or update this one",
            Self::Damaged { .. } => {
                "restore review.sqlite from a backup, or move it aside to start the review afresh"
            }
            Self::Invalid(_) => "this is a bug in the caller; the database was not changed",
            Self::ReadOnly { .. } => {
                "to review, copy the workspace folder somewhere you may write (or make it writable); \
                 to export, give --out a folder elsewhere. Nothing in it was changed"
            }
        }
    }
}

/// Where a case stands in review.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    /// Not opened yet.
    New,
    /// Opened or edited, not finished.
    InReview,
    /// Accepted by the reviewer.
    Done,
    /// Needs another look.
    Flagged,
}

impl ReviewStatus {
    /// The name stored in the database.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::InReview => "in_review",
            Self::Done => "done",
            Self::Flagged => "flagged",
        }
    }

    /// The status as lists show it.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::InReview => "in review",
            Self::Done => "done",
            Self::Flagged => "flagged",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::New, Self::InReview, Self::Done, Self::Flagged]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// One entry of the corrections log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Correction {
    /// Position in the log (grows by one per entry, never reused).
    pub id: i64,
    /// The case.
    pub case_id: String,
    /// What was changed, as a path into the case's findings (`liver.tumor`,
    /// `liver.lesions.0.size`, `key_slice`, `status`, `note`, …).
    pub field: String,
    /// The value before (JSON; `null` when there was none).
    pub old_value: serde_json::Value,
    /// The value after (JSON).
    pub new_value: serde_json::Value,
    /// Who made the change.
    pub reviewer: String,
    /// When, UTC, RFC 3339 with milliseconds.
    pub at: String,
    /// The entry this one undoes, if it is an undo.
    pub undoes: Option<i64>,
}

/// The field of a correction that sets a case's status (kept in the cases table too).
pub const STATUS_FIELD: &str = "status";

impl Correction {
    /// Whether this entry set the case's status to `status`.
    #[must_use]
    pub fn sets_status(&self, status: ReviewStatus) -> bool {
        self.field == STATUS_FIELD && self.new_value == status.as_str()
    }
}

/// What a caller asks to record.
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    /// The case.
    pub case_id: String,
    /// The field (see [`Correction::field`]).
    pub field: String,
    /// The value before.
    pub old_value: serde_json::Value,
    /// The value after.
    pub new_value: serde_json::Value,
    /// Who.
    pub reviewer: String,
}

/// A case's review state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseState {
    /// The case.
    pub case_id: String,
    /// Where it stands.
    pub status: ReviewStatus,
    /// Who last changed it.
    pub reviewer: Option<String>,
    /// When (RFC 3339, UTC).
    pub updated_at: Option<String>,
}

/// An open review database.
pub struct ReviewStore {
    connection: Connection,
    path: PathBuf,
    /// Opened read-only: every change is refused with [`StoreError::ReadOnly`].
    read_only: bool,
}

const SCHEMA_V1: &str = "
CREATE TABLE cases (
    case_id    TEXT PRIMARY KEY NOT NULL,
    status     TEXT NOT NULL DEFAULT 'new'
               CHECK (status IN ('new', 'in_review', 'done', 'flagged')),
    reviewer   TEXT,
    updated_at TEXT
);
CREATE TABLE corrections (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    case_id   TEXT NOT NULL,
    field     TEXT NOT NULL,
    old_value TEXT NOT NULL,
    new_value TEXT NOT NULL,
    reviewer  TEXT NOT NULL,
    at        TEXT NOT NULL,
    undoes    INTEGER REFERENCES corrections(id)
);
CREATE INDEX corrections_by_case ON corrections(case_id, id);
-- The log is append-only: the database itself refuses changes and deletions.
CREATE TRIGGER corrections_no_update BEFORE UPDATE ON corrections
    BEGIN SELECT RAISE(ABORT, 'the corrections log is append-only'); END;
CREATE TRIGGER corrections_no_delete BEFORE DELETE ON corrections
    BEGIN SELECT RAISE(ABORT, 'the corrections log is append-only'); END;
";

/// Version 2: the findings each case's review started from (the model's, as the reviewer
/// saw them), so that a reviewed case's findings can be rebuilt from this file alone when
/// `predictions.jsonl` is lost or damaged.
const SCHEMA_V2: &str = "
CREATE TABLE bases (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    case_id  TEXT NOT NULL,
    findings TEXT NOT NULL,
    at       TEXT NOT NULL
);
CREATE INDEX bases_by_case ON bases(case_id, id);
";

impl ReviewStore {
    /// Opens (creating if needed) the review database at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let sqlite = |error: rusqlite::Error| StoreError::Sqlite {
            path: path.to_path_buf(),
            detail: error.to_string(),
        };
        let damaged = |error: rusqlite::Error| StoreError::Damaged {
            path: path.to_path_buf(),
            detail: error.to_string(),
        };
        // A link in the database's place (or its journal's) would turn whatever it points to
        // into a database.
        for file in [
            path.to_path_buf(),
            sibling(path, "-wal"),
            sibling(path, "-shm"),
            sibling(path, "-journal"),
        ] {
            keyslice_io::atomic::refuse_link(&file).map_err(|error| StoreError::Sqlite {
                path: file.clone(),
                detail: error.to_string(),
            })?;
        }
        if let Some(folder_too) = read_only_place(path) {
            return Self::open_read_only(path, folder_too);
        }
        let mut connection = Connection::open(path).map_err(sqlite)?;
        connection
            .busy_timeout(Duration::from_secs(10))
            .map_err(sqlite)?;
        let version = schema_version(&connection, path)?;
        if let Err(error) = connection.pragma_update(None, "journal_mode", "WAL") {
            // A file system that refuses writes (a read-only mount, a locked share).
            if is_read_only_error(&error) {
                drop(connection);
                return Self::open_read_only(path, true);
            }
            return Err(sqlite(error));
        }
        connection
            .pragma_update(None, "synchronous", "FULL")
            .map_err(sqlite)?;
        connection
            .pragma_update(None, "foreign_keys", "ON")
            .map_err(sqlite)?;
        if version < SCHEMA_VERSION {
            let transaction = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sqlite)?;
            // Another process may have migrated while this one waited for the lock.
            let current: i32 = transaction
                .query_row("PRAGMA user_version", [], |row| row.get(0))
                .map_err(damaged)?;
            if current == 0 {
                transaction.execute_batch(SCHEMA_V1).map_err(damaged)?;
            }
            if current < 2 {
                transaction.execute_batch(SCHEMA_V2).map_err(damaged)?;
            }
            if current < SCHEMA_VERSION {
                transaction
                    .pragma_update(None, "user_version", SCHEMA_VERSION)
                    .map_err(sqlite)?;
            }
            transaction.commit().map_err(sqlite)?;
        }
        Ok(Self {
            connection,
            path: path.to_path_buf(),
            read_only: false,
        })
    }

    /// Opens the database at `path` to read only: SQLite writes nothing, and with
    /// `folder_too` (no `-shm` file can be made beside it) reads it as immutable. A database
    /// that is not there, or whose schema would need upgrading, is refused as read-only.
    fn open_read_only(path: &Path, folder_too: bool) -> Result<Self, StoreError> {
        use rusqlite::OpenFlags;
        let read_only = || StoreError::ReadOnly {
            path: path.to_path_buf(),
        };
        if !path.is_file() {
            return Err(read_only());
        }
        let damaged = |error: rusqlite::Error| StoreError::Damaged {
            path: path.to_path_buf(),
            detail: error.to_string(),
        };
        // Immutable reading skips the write-ahead log: only when there is none to read (a
        // killed process may have left changes there, which must not be missed).
        let wal_holds_changes =
            std::fs::metadata(sibling(path, "-wal")).is_ok_and(|meta| meta.len() > 0);
        let connection = if folder_too && !wal_holds_changes {
            let uri = format!("file:{}?immutable=1", uri_path(path));
            Connection::open_with_flags(
                uri,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
            )
        } else {
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        }
        .map_err(damaged)?;
        if schema_version(&connection, path)? < SCHEMA_VERSION {
            return Err(read_only());
        }
        Ok(Self {
            connection,
            path: path.to_path_buf(),
            read_only: true,
        })
    }

    /// Whether this database was opened read-only (see [`StoreError::ReadOnly`]).
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    #[expect(
        clippy::needless_pass_by_value,
        reason = "used as `map_err(|e| self.error(e))`"
    )]
    fn error(&self, error: rusqlite::Error) -> StoreError {
        if self.read_only || is_read_only_error(&error) {
            return StoreError::ReadOnly {
                path: self.path.clone(),
            };
        }
        StoreError::Sqlite {
            path: self.path.clone(),
            detail: error.to_string(),
        }
    }

    /// Appends `edit` to the log and marks its case in review (unless done or flagged);
    /// committed before it returns. Returns the entry's id.
    pub fn record(&mut self, edit: &Edit) -> Result<i64, StoreError> {
        self.append(edit, None, None)
    }

    /// Undoes entry `id`: appends its reverse (new and old values swapped), which points
    /// back at it. Returns the new entry.
    pub fn undo(&mut self, id: i64, reviewer: &str) -> Result<Correction, StoreError> {
        let original = self
            .correction(id)?
            .ok_or_else(|| StoreError::Invalid(format!("no correction {id} to undo")))?;
        let reverse = Edit {
            case_id: original.case_id,
            field: original.field,
            old_value: original.new_value,
            new_value: original.old_value,
            reviewer: reviewer.to_string(),
        };
        let status = (reverse.field == STATUS_FIELD)
            .then(|| reverse.new_value.as_str().and_then(ReviewStatus::parse))
            .flatten();
        let new_id = self.append(&reverse, Some(id), status)?;
        self.correction(new_id)?
            .ok_or_else(|| StoreError::Invalid(format!("correction {new_id} vanished")))
    }

    /// Appends one entry and updates the case's state, in one transaction: the case goes to
    /// `status` when given, else from `new` to `in_review`.
    fn append(
        &mut self,
        edit: &Edit,
        undoes: Option<i64>,
        status: Option<ReviewStatus>,
    ) -> Result<i64, StoreError> {
        if edit.case_id.is_empty() || edit.field.is_empty() || edit.reviewer.is_empty() {
            return Err(StoreError::Invalid(
                "an edit needs a case, a field and a reviewer".into(),
            ));
        }
        let at = now_rfc3339();
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| StoreError::Sqlite {
                path: self.path.clone(),
                detail: e.to_string(),
            })?;
        let result = (|| -> rusqlite::Result<i64> {
            transaction.execute(
                "INSERT INTO corrections (case_id, field, old_value, new_value, reviewer, at, undoes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    edit.case_id,
                    edit.field,
                    edit.old_value.to_string(),
                    edit.new_value.to_string(),
                    edit.reviewer,
                    at,
                    undoes
                ],
            )?;
            let id = transaction.last_insert_rowid();
            transaction.execute(
                "INSERT INTO cases (case_id, status, reviewer, updated_at)
                 VALUES (?1, COALESCE(?4, 'in_review'), ?2, ?3)
                 ON CONFLICT(case_id) DO UPDATE SET
                     status = CASE
                         WHEN ?4 IS NOT NULL THEN ?4
                         WHEN status = 'new' THEN 'in_review'
                         ELSE status END,
                     reviewer = excluded.reviewer,
                     updated_at = excluded.updated_at",
                params![
                    edit.case_id,
                    edit.reviewer,
                    at,
                    status.map(ReviewStatus::as_str)
                ],
            )?;
            Ok(id)
        })();
        let path = self.path.clone();
        let error = |e: rusqlite::Error| StoreError::Sqlite {
            path,
            detail: e.to_string(),
        };
        match result {
            Ok(id) => {
                transaction.commit().map_err(error)?;
                Ok(id)
            }
            // Dropping the transaction rolls it back.
            Err(e) => Err(error(e)),
        }
    }

    /// Sets a case's status, logged as a correction of field `status` (one transaction).
    pub fn set_status(
        &mut self,
        case_id: &str,
        status: ReviewStatus,
        reviewer: &str,
    ) -> Result<i64, StoreError> {
        let before = self.case_state(case_id)?.status;
        self.append(
            &Edit {
                case_id: case_id.to_string(),
                field: STATUS_FIELD.into(),
                old_value: serde_json::Value::from(before.as_str()),
                new_value: serde_json::Value::from(status.as_str()),
                reviewer: reviewer.to_string(),
            },
            None,
            Some(status),
        )
    }

    /// A case's state (`new` when never touched).
    pub fn case_state(&self, case_id: &str) -> Result<CaseState, StoreError> {
        let row = self
            .connection
            .query_row(
                "SELECT status, reviewer, updated_at FROM cases WHERE case_id = ?1",
                params![case_id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, Option<String>>(1)?,
                        row.get::<_, Option<String>>(2)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.error(e))?;
        Ok(match row {
            None => CaseState {
                case_id: case_id.to_string(),
                status: ReviewStatus::New,
                reviewer: None,
                updated_at: None,
            },
            Some((status, reviewer, updated_at)) => CaseState {
                case_id: case_id.to_string(),
                status: ReviewStatus::parse(&status).ok_or_else(|| StoreError::Damaged {
                    path: self.path.clone(),
                    detail: format!("unknown status {status:?} for {case_id}"),
                })?,
                reviewer,
                updated_at,
            },
        })
    }

    /// One log entry.
    pub fn correction(&self, id: i64) -> Result<Option<Correction>, StoreError> {
        self.connection
            .query_row(
                "SELECT id, case_id, field, old_value, new_value, reviewer, at, undoes
                 FROM corrections WHERE id = ?1",
                params![id],
                row_to_correction,
            )
            .optional()
            .map_err(|e| self.error(e))
    }

    /// The log of one case (or of all cases when `None`), oldest first.
    pub fn corrections(&self, case_id: Option<&str>) -> Result<Vec<Correction>, StoreError> {
        let mut statement = self
            .connection
            .prepare(
                "SELECT id, case_id, field, old_value, new_value, reviewer, at, undoes
                 FROM corrections WHERE ?1 IS NULL OR case_id = ?1 ORDER BY id",
            )
            .map_err(|e| self.error(e))?;
        let rows = statement
            .query_map(params![case_id], row_to_correction)
            .map_err(|e| self.error(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.error(e))
    }

    /// Remembers `findings` (JSON; `null` when the case was not analysed) as what the review
    /// of `case_id` starts from, unless it is already the latest remembered; committed before
    /// it returns.
    pub fn remember_base(
        &mut self,
        case_id: &str,
        findings: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let text = findings.to_string();
        if self.base_text(case_id)?.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        self.connection
            .execute(
                "INSERT INTO bases (case_id, findings, at) VALUES (?1, ?2, ?3)",
                params![case_id, text, now_rfc3339()],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// The findings the review of `case_id` last started from (JSON, `null` when the case was
    /// reviewed without an analysis), or `None` when none was remembered.
    pub fn base(&self, case_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.base_text(case_id)?
            .map(|text| {
                serde_json::from_str(&text).map_err(|error| StoreError::Damaged {
                    path: self.path.clone(),
                    detail: format!("the remembered findings of {case_id} are not JSON: {error}"),
                })
            })
            .transpose()
    }

    fn base_text(&self, case_id: &str) -> Result<Option<String>, StoreError> {
        self.connection
            .query_row(
                "SELECT findings FROM bases WHERE case_id = ?1 ORDER BY id DESC LIMIT 1",
                params![case_id],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.error(e))
    }

    /// SQLite's own consistency check of the whole file.
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        let result: String = self
            .connection
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .map_err(|e| self.error(e))?;
        if result == "ok" {
            Ok(())
        } else {
            Err(StoreError::Damaged {
                path: self.path.clone(),
                detail: result,
            })
        }
    }
}

fn row_to_correction(row: &rusqlite::Row<'_>) -> rusqlite::Result<Correction> {
    // A value that is not JSON was damaged on disk: an error, never a different value.
    let json = |column: usize| -> rusqlite::Result<serde_json::Value> {
        let text: String = row.get(column)?;
        serde_json::from_str(&text).map_err(|error| {
            rusqlite::Error::FromSqlConversionFailure(
                column,
                rusqlite::types::Type::Text,
                Box::new(error),
            )
        })
    };
    Ok(Correction {
        id: row.get(0)?,
        case_id: row.get(1)?,
        field: row.get(2)?,
        old_value: json(3)?,
        new_value: json(4)?,
        reviewer: row.get(5)?,
        at: row.get(6)?,
        undoes: row.get(7)?,
    })
}

/// The current time, UTC, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
#[must_use]
pub fn now_rfc3339() -> String {
    keyslice_core::date::now_rfc3339()
}

/// `path` with `suffix` added to its file name (`review.sqlite-wal`).
fn sibling(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    std::path::PathBuf::from(name)
}

/// The schema version of the database at `path`, refused when a newer Keyslice wrote it.
/// Reading it is the first read of the file: a file that is not SQLite fails here.
fn schema_version(connection: &Connection, path: &Path) -> Result<i32, StoreError> {
    let version: i32 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|error| StoreError::Damaged {
            path: path.to_path_buf(),
            detail: error.to_string(),
        })?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Newer {
            path: path.to_path_buf(),
            found: version,
        });
    }
    Ok(version)
}

/// Whether SQLite refused a write because the file or its folder is read-only.
fn is_read_only_error(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(failure, _)
        if failure.code == rusqlite::ErrorCode::ReadOnly)
}

/// `Some(folder_too)` when the database at `path` is to be opened read-only (see
/// [`keyslice_io::atomic::unwritable`]): its folder is (then `folder_too`), or the file is.
fn read_only_place(path: &Path) -> Option<bool> {
    let folder = path
        .parent()
        .filter(|folder| !folder.as_os_str().is_empty());
    if folder.is_some_and(keyslice_io::atomic::unwritable) {
        return Some(true);
    }
    keyslice_io::atomic::unwritable(path).then_some(false)
}

/// `path` for an SQLite `file:` URI: `%`, `?` and `#` escaped.
fn uri_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}
