//! Preconditioning records: how far a pass over a target got, and when it finished.

use super::*;

/// The preconditioning record of a target.
#[derive(Debug, Clone, PartialEq)]
pub struct Precondition {
    pub target: String,
    pub size: u64,
    pub bs: u64,
    pub data_json: String,
    pub state_json: String,
    pub bytes_written: u64,
    pub started_at: String,
    pub finished_at: Option<String>,
}

impl Store {
    /// The preconditioning record of `target` at `size`, if any.
    pub fn precondition(&self, target: &str, size: u64) -> Result<Option<Precondition>> {
        let r = self
            .conn
            .query_row(
                "SELECT target, size, bs, data_json, state_json, bytes_written, started_at, finished_at
                 FROM preconditions WHERE target = ?1 AND size = ?2",
                params![target, size as i64],
                |r| {
                    Ok(Precondition {
                        target: r.get(0)?,
                        size: r.get::<_, i64>(1)? as u64,
                        bs: r.get::<_, i64>(2)? as u64,
                        data_json: r.get(3)?,
                        state_json: r.get(4)?,
                        bytes_written: r.get::<_, i64>(5)? as u64,
                        started_at: r.get(6)?,
                        finished_at: r.get(7)?,
                    })
                },
            )
            .optional();
        self.sql(r)
    }

    /// Forgets every preconditioning record of a target (trims gave its blocks back).
    pub fn forget_precondition(&self, target: &str) -> Result<()> {
        let x = self.conn.execute("DELETE FROM preconditions WHERE target = ?1", params![target]);
        self.sql(x).map(drop)
    }

    /// Creates or replaces the preconditioning record of a target.
    pub fn save_precondition(&self, p: &Precondition) -> Result<()> {
        let x = self.conn.execute(
            "INSERT OR REPLACE INTO preconditions (target, size, bs, data_json, state_json, bytes_written, started_at, finished_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                p.target,
                p.size as i64,
                p.bs as i64,
                p.data_json,
                p.state_json,
                p.bytes_written as i64,
                p.started_at,
                p.finished_at
            ],
        );
        self.sql(x).map(drop)
    }
}
