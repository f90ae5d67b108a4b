//! Reloading when the rules change on disk.
//!
//! A reload is a SIGHUP away, but an operator who edits an exclusion, a
//! deployment that replaces a compiled artifact or a Kubernetes ConfigMap
//! update (a symlink swapped under the mount) should not need one. The
//! watcher polls what the running rules were compiled from: every file the
//! compiler read (configuration, includes, `@pmFromFile` data, the manifest)
//! and every `Include` glob, whose matches are listed again so that a new
//! file in `crs/rules/` counts while an editor's swap file beside it does
//! not. Polling, not inotify: it sees a file replaced by a rename or behind
//! a symlink the same way, on any file system, with one `stat` per file per
//! interval.
//!
//! A change triggers a reload only once the inputs have stayed the same for
//! one more interval, so a file still being written is not compiled half
//! way. After each reload (from a change or a SIGHUP, refused or not) the
//! watcher starts again from what that compilation read. A file that no
//! longer holds what the compiler read (it changed while the rules
//! compiled) counts as changed: the contents are compared, not times,
//! which some file systems keep to the second.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What a compilation read: the files, and the `Include` globs with what
/// they matched then.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inputs {
    /// Paths as the compiler read them, with a digest of what it read when
    /// known (a compiled artifact is read outside the recording).
    pub files: Vec<(PathBuf, Option<u64>)>,
    /// Glob patterns and the paths they matched, sorted.
    pub globs: Vec<(String, Vec<PathBuf>)>,
}

/// A digest of a file's contents, to tell whether it still holds what was
/// read.
pub(crate) fn digest(bytes: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

impl Inputs {
    /// Adds `other`'s inputs (duplicates dropped).
    pub(crate) fn extend(&mut self, other: Inputs) {
        for f in other.files {
            match self.files.iter_mut().find(|(p, _)| *p == f.0) {
                Some(known) => {
                    known.1 = known.1.or(f.1);
                }
                None => self.files.push(f),
            }
        }
        for g in other.globs {
            if !self.globs.contains(&g) {
                self.globs.push(g);
            }
        }
    }
}

/// A file's identity and version, as far as `stat` tells: `None` when it
/// cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp(Option<(u64, Option<SystemTime>, u64)>);

impl Stamp {
    fn of(path: &Path) -> Stamp {
        Stamp(std::fs::metadata(path).ok().map(|m| {
            #[cfg(unix)]
            let ino = std::os::unix::fs::MetadataExt::ino(&m);
            #[cfg(not(unix))]
            let ino = 0;
            (m.len(), m.modified().ok(), ino)
        }))
    }
}

/// The inputs' state at one moment: a stamp per file, the matches per glob.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Snapshot {
    files: Vec<Stamp>,
    globs: Vec<Vec<PathBuf>>,
}

impl Snapshot {
    fn take(inputs: &Inputs) -> Snapshot {
        let disk = waf_compiler::files::Files::disk();
        Snapshot {
            files: inputs.files.iter().map(|(f, _)| Stamp::of(f)).collect(),
            globs: inputs
                .globs
                .iter()
                .map(|(pattern, _)| disk.glob(pattern).unwrap_or_default())
                .collect(),
        }
    }
}

/// Polls a ruleset's inputs for changes.
pub(crate) struct Watcher {
    inputs: Inputs,
    seen: Snapshot,
    /// A change seen at the last poll, waiting to stay the same for one
    /// more.
    pending: Option<Snapshot>,
    /// What changed between the last compilation's reads and the first
    /// snapshot.
    stale: Option<String>,
}

impl Watcher {
    /// Watches `inputs`, as the compilation read them.
    pub(crate) fn new(inputs: Inputs) -> Watcher {
        // Stamped first, then compared with what was compiled: a change
        // after the stamp is seen by the polls, one before it here.
        let seen = Snapshot::take(&inputs);
        let file = inputs.files.iter().find(|(path, read)| {
            read.is_some_and(|d| std::fs::read(path).map(|b| digest(&b)).ok() != Some(d))
        });
        let glob = || {
            seen.globs
                .iter()
                .zip(&inputs.globs)
                .find(|(now, (_, then))| *now != then)
                .map(|(_, (pattern, _))| format!("the files matching {pattern}"))
        };
        let stale = file.map(|(f, _)| f.display().to_string()).or_else(glob);
        Watcher {
            inputs,
            seen,
            pending: None,
            stale,
        }
    }

    /// Called every interval: what changed, once the inputs differ from
    /// what was compiled and have stayed the same since the last poll.
    pub(crate) fn poll(&mut self) -> Option<String> {
        let now = Snapshot::take(&self.inputs);
        if now == self.seen && self.stale.is_none() {
            self.pending = None;
            return None;
        }
        if self.pending.as_ref() == Some(&now) {
            self.pending = None;
            return Some(self.describe(&now));
        }
        self.pending = Some(now);
        None
    }

    /// The first input that differs from what was compiled.
    fn describe(&self, now: &Snapshot) -> String {
        if let Some(stale) = &self.stale {
            return stale.clone();
        }
        let file = self
            .inputs
            .files
            .iter()
            .zip(self.seen.files.iter().zip(&now.files))
            .find(|(_, (then, now))| then != now)
            .map(|((f, _), _)| f.display().to_string());
        let glob = || {
            self.inputs
                .globs
                .iter()
                .zip(&now.globs)
                .find(|((_, then), now)| then != *now)
                .map(|((pattern, _), _)| format!("the files matching {pattern}"))
        };
        file.or_else(glob)
            .unwrap_or_else(|| "a rule file".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("waf-watch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    /// `path` as a compilation read it now.
    fn read(path: &Path) -> (PathBuf, Option<u64>) {
        let d = std::fs::read(path).ok().map(|b| digest(&b));
        (path.to_path_buf(), d)
    }

    #[test]
    fn a_change_counts_once_it_has_stayed_the_same_for_a_poll() {
        let d = dir("change");
        let f = d.join("rules.conf");
        std::fs::write(&f, "SecRuleEngine On\n").expect("write");
        let inputs = Inputs {
            files: vec![read(&f)],
            globs: vec![],
        };
        let mut w = Watcher::new(inputs);
        assert_eq!(w.poll(), None, "nothing changed");
        std::fs::write(&f, "SecRuleEngine DetectionOnly\n").expect("write");
        assert_eq!(w.poll(), None, "changed: wait a poll");
        std::fs::write(&f, "SecRuleEngine DetectionOnly # still writing\n").expect("write");
        assert_eq!(w.poll(), None, "changed again: wait again");
        assert_eq!(w.poll(), Some(f.display().to_string()));
        // Until it is watched anew (after the reload), the change stands.
        assert_eq!(w.poll(), None);
        assert!(w.poll().is_some());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn removed_and_replaced_files_are_changes() {
        let d = dir("replace");
        let f = d.join("rules.conf");
        std::fs::write(&f, "A\n").expect("write");
        let mut w = Watcher::new(Inputs {
            files: vec![read(&f)],
            globs: vec![],
        });
        // Replaced by a rename, same length (how `waf compile -o` and most
        // deployments write).
        let tmp = d.join("rules.conf.tmp");
        std::fs::write(&tmp, "B\n").expect("write");
        std::fs::rename(&tmp, &f).expect("rename");
        assert_eq!(w.poll(), None);
        assert!(w.poll().is_some(), "a renamed-in file is a change");
        let mut w = Watcher::new(Inputs {
            files: vec![read(&f)],
            globs: vec![],
        });
        std::fs::remove_file(&f).expect("remove");
        assert_eq!(w.poll(), None);
        assert!(w.poll().is_some(), "a removed file is a change");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_new_file_matching_an_include_glob_is_a_change_and_others_are_not() {
        let d = dir("glob");
        std::fs::write(d.join("a.conf"), "A\n").expect("write");
        let pattern = format!("{}/*.conf", d.display());
        let inputs = Inputs {
            files: vec![read(&d.join("a.conf"))],
            globs: vec![(pattern.clone(), vec![d.join("a.conf")])],
        };
        let mut w = Watcher::new(inputs);
        std::fs::write(d.join(".a.conf.swp"), "editor").expect("write");
        assert_eq!(
            (w.poll(), w.poll()),
            (None, None),
            "not matched by the glob"
        );
        std::fs::write(d.join("b.conf"), "B\n").expect("write");
        assert_eq!(w.poll(), None);
        assert_eq!(w.poll(), Some(format!("the files matching {pattern}")));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_written_while_the_rules_compiled_is_a_change() {
        let d = dir("stale");
        let f = d.join("rules.conf");
        std::fs::write(&f, "A\n").expect("write");
        let compiled = Inputs {
            files: vec![read(&f)],
            globs: vec![(format!("{}/*.conf", d.display()), vec![f.clone()])],
        };
        let mut w = Watcher::new(compiled.clone());
        assert_eq!((w.poll(), w.poll()), (None, None), "as it was read");
        // Written after the compiler read it, before the watcher looked.
        std::fs::write(&f, "B\n").expect("write");
        let mut w = Watcher::new(compiled.clone());
        assert_eq!(w.poll(), None);
        assert_eq!(w.poll(), Some(f.display().to_string()));
        // A file added to an included directory meanwhile.
        std::fs::write(&f, "A\n").expect("write");
        std::fs::write(d.join("new.conf"), "C\n").expect("write");
        let mut w = Watcher::new(compiled);
        assert_eq!(w.poll(), None);
        assert!(w
            .poll()
            .is_some_and(|m| m.starts_with("the files matching")));
        let _ = std::fs::remove_dir_all(&d);
    }
}
