//! Object paths of the warehouse (SPEC §4.3), built in one place:
//! `<prefix>/teams/<teamId>/tables/<table>/date=<YYYY-MM-DD>/<file id>.parquet`.

use object_store::path::Path;

/// The path of one data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFilePath(pub Path);

impl DataFilePath {
    /// Builds the path; `date` is the UTC day of the rows' `received_at`.
    pub fn new(
        prefix: &str,
        team: &str,
        table: &str,
        date: chrono::NaiveDate,
        file_id: &str,
    ) -> Self {
        let mut parts: Vec<String> = prefix
            .split('/')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        parts.extend([
            "teams".into(),
            team.into(),
            "tables".into(),
            table.into(),
            format!("date={}", date.format("%Y-%m-%d")),
            format!("{file_id}.parquet"),
        ]);
        DataFilePath(Path::from_iter(parts))
    }

    /// The path as stored in the catalog.
    pub fn as_str(&self) -> &str {
        self.0.as_ref()
    }

    /// The same directory with a fresh file id: where an object whose reservation was
    /// reclaimed is written again (the old name may have been deleted meanwhile).
    pub fn renamed(path: &str) -> String {
        match path.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/{}.parquet", new_file_id()),
            None => format!("{}.parquet", new_file_id()),
        }
    }
}

/// A fresh file id: time-ordered, unique.
pub fn new_file_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hive_style_layout() {
        let d = chrono::NaiveDate::from_ymd_opt(2012, 12, 2).unwrap();
        let p = DataFilePath::new("wh/", "tm_1", "tracks", d, "f1");
        assert_eq!(
            p.as_str(),
            "wh/teams/tm_1/tables/tracks/date=2012-12-02/f1.parquet"
        );
        let p = DataFilePath::new("", "tm_1", "tracks", d, "f1");
        assert_eq!(
            p.as_str(),
            "teams/tm_1/tables/tracks/date=2012-12-02/f1.parquet"
        );
        let r = DataFilePath::renamed(p.as_str());
        assert!(
            r.starts_with("teams/tm_1/tables/tracks/date=2012-12-02/") && r.ends_with(".parquet")
        );
        assert_ne!(r, p.as_str());
    }
}
