//! Where the compiler reads files from: the disk, or a snapshot of the
//! files an earlier compilation read.
//!
//! A configuration reaches beyond its first file: `Include` (with globs),
//! `@pmFromFile` lists, `SecUnicodeMapFile`. A compiled artifact
//! (`crate::artifact`) must compile on a machine that has none of them, to
//! the same program, with the same file names in diagnostics and log lines.
//! So every file-system question the compiler asks goes through [`Files`]:
//! on the disk it can record the answers ([`Files::recording`]), and a
//! [`Snapshot`] of them answers the same questions later, without the disk.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The file system a compilation reads (cheap to clone: clones share the
/// recording).
#[derive(Clone, Debug, Default)]
pub struct Files(Source);

#[derive(Clone, Debug, Default)]
enum Source {
    /// The disk.
    #[default]
    Disk,
    /// The disk, keeping every answer.
    Recording(Arc<Mutex<Snapshot>>),
    /// Recorded answers only.
    Snapshot(Arc<Snapshot>),
}

/// The answers a compilation got from the file system: the files it read,
/// the canonical form of the paths it included, and what its globs matched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// File contents by the path they were read at.
    pub reads: BTreeMap<PathBuf, Vec<u8>>,
    /// `Path::canonicalize` answers that succeeded.
    pub canonical: BTreeMap<PathBuf, PathBuf>,
    /// `Include` globs and the files they matched, sorted.
    pub globs: BTreeMap<String, Vec<PathBuf>>,
}

impl Files {
    /// The disk, recording nothing.
    pub fn disk() -> Files {
        Files(Source::Disk)
    }

    /// The disk, recording every answer for [`Files::recorded`].
    pub fn recording() -> Files {
        Files(Source::Recording(Arc::default()))
    }

    /// Only the answers of `snapshot`: a path it does not hold is not found.
    pub fn snapshot(snapshot: Snapshot) -> Files {
        Files(Source::Snapshot(Arc::new(snapshot)))
    }

    /// What a [`Files::recording`] has recorded so far (`None` for the
    /// other kinds).
    pub fn recorded(&self) -> Option<Snapshot> {
        match &self.0 {
            Source::Recording(r) => Some(lock(r).clone()),
            Source::Disk | Source::Snapshot(_) => None,
        }
    }

    /// The contents of the file at `path`.
    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        match &self.0 {
            Source::Disk => std::fs::read(path),
            Source::Recording(r) => {
                let bytes = std::fs::read(path)?;
                lock(r).reads.insert(path.to_path_buf(), bytes.clone());
                Ok(bytes)
            }
            Source::Snapshot(s) => s.reads.get(path).cloned().ok_or_else(|| not_held(path)),
        }
    }

    /// `path` made absolute with every link resolved (what include cycles
    /// are detected with).
    pub fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        match &self.0 {
            Source::Disk => path.canonicalize(),
            Source::Recording(r) => {
                let c = path.canonicalize()?;
                lock(r).canonical.insert(path.to_path_buf(), c.clone());
                Ok(c)
            }
            Source::Snapshot(s) => s.canonical.get(path).cloned().ok_or_else(|| not_held(path)),
        }
    }

    /// The regular files a glob matches, sorted by name (as Apache and
    /// libmodsecurity include them).
    pub fn glob(&self, pattern: &str) -> Result<Vec<PathBuf>, glob::PatternError> {
        let on_disk = || -> Result<Vec<PathBuf>, glob::PatternError> {
            let mut v: Vec<PathBuf> = glob::glob(pattern)?
                .filter_map(Result::ok)
                .filter(|p| p.is_file())
                .collect();
            v.sort();
            Ok(v)
        };
        match &self.0 {
            Source::Disk => on_disk(),
            Source::Recording(r) => {
                let v = on_disk()?;
                lock(r).globs.insert(pattern.to_string(), v.clone());
                Ok(v)
            }
            Source::Snapshot(s) => {
                // Checks the pattern as the disk's glob would.
                glob::Pattern::new(pattern)?;
                Ok(s.globs.get(pattern).cloned().unwrap_or_default())
            }
        }
    }
}

fn lock(m: &Mutex<Snapshot>) -> std::sync::MutexGuard<'_, Snapshot> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn not_held(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "`{}` is not in the compiled artifact (it was not read when it was made)",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_answers_what_the_recording_saw_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("waf-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.conf"), "SecRuleEngine On\n").unwrap();
        std::fs::write(dir.join("b.conf"), "# b\n").unwrap();
        let rec = Files::recording();
        let a = dir.join("a.conf");
        assert_eq!(rec.read(&a).unwrap(), b"SecRuleEngine On\n");
        let canon = rec.canonicalize(&a).unwrap();
        let pattern = format!("{}/*.conf", dir.display());
        let matched = rec.glob(&pattern).unwrap();
        assert_eq!(matched, vec![dir.join("a.conf"), dir.join("b.conf")]);
        let snap = Files::snapshot(rec.recorded().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(snap.read(&a).unwrap(), b"SecRuleEngine On\n");
        assert_eq!(snap.canonicalize(&a).unwrap(), canon);
        assert_eq!(snap.glob(&pattern).unwrap(), matched);
        let b = dir.join("b.conf");
        assert_eq!(
            snap.read(&b).unwrap_err().kind(),
            io::ErrorKind::NotFound,
            "b.conf was matched by the glob but never read"
        );
        assert!(snap.glob("[").is_err());
        assert!(snap.glob("/nowhere/*.conf").unwrap().is_empty());
    }
}
