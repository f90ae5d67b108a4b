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
//! watcher starts again from what that compilation read; a file modified
//! while it compiled counts as changed.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// See [`Stamp::modified_since`].
const MTIME_MARGIN: Duration = Duration::from_secs(2);

/// What a compilation read: the files, and the `Include` globs with what
/// they matched then.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inputs {
    /// Paths as the compiler read them.
    pub files: Vec<PathBuf>,
    /// Glob patterns and the paths they matched, sorted.
    pub globs: Vec<(String, Vec<PathBuf>)>,
}

impl Inputs {
    /// Adds `other`'s inputs (duplicates dropped).
    pub(crate) fn extend(&mut self, other: Inputs) {
        for f in other.files {
            if !self.files.contains(&f) {
                self.files.push(f);
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
    fn of(path: &std::path::Path) -> Stamp {
        Stamp(std::fs::metadata(path).ok().map(|m| {
            #[cfg(unix)]
            let ino = std::os::unix::fs::MetadataExt::ino(&m);
            #[cfg(not(unix))]
            let ino = 0;
            (m.len(), m.modified().ok(), ino)
        }))
    }

    /// Whether it may have been written at `t` or after. Some file systems
    /// keep modification times to the second or two, and Linux takes them
    /// from a clock a tick behind: a margin makes a write just after `t`
    /// count (at worst, a reload right after an edit runs once more).
    fn modified_since(&self, t: SystemTime) -> bool {
        let t = t.checked_sub(MTIME_MARGIN).unwrap_or(t);
        self.0.as_ref().and_then(|s| s.1).is_some_and(|m| m >= t)
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
            files: inputs.files.iter().map(|f| Stamp::of(f)).collect(),
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
    /// Something changed while the last compilation ran.
    stale: bool,
}

impl Watcher {
    /// Watches `inputs`, as read by a compilation that started at `started`.
    pub(crate) fn new(inputs: Inputs, started: SystemTime) -> Watcher {
        let seen = Snapshot::take(&inputs);
        // A glob whose matches differ from the compilation's is a change
        // too (a file added while it ran).
        let stale = seen.files.iter().any(|s| s.modified_since(started))
            || seen
                .globs
                .iter()
                .zip(&inputs.globs)
                .any(|(now, (_, then))| now != then);
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
        if now == self.seen && !self.stale {
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
        let file = self
            .inputs
            .files
            .iter()
            .zip(self.seen.files.iter().zip(&now.files))
            .find(|(_, (then, now))| then != now)
            .map(|(f, _)| f.display().to_string());
        let glob = || {
            self.inputs
                .globs
                .iter()
                .zip(&now.globs)
                .find(|((_, then), now)| then != *now)
                .map(|((pattern, _), _)| format!("the files matching {pattern}"))
        };
        file.or_else(glob)
            .unwrap_or_else(|| "a file, while the rules compiled".to_string())
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

    /// A compilation that started before the test's writes.
    fn before() -> SystemTime {
        SystemTime::now() - Duration::from_secs(1)
    }

    /// A compilation that started well after the test's first writes.
    fn after_writes() -> SystemTime {
        SystemTime::now() + Duration::from_secs(10)
    }

    #[test]
    fn a_change_counts_once_it_has_stayed_the_same_for_a_poll() {
        let d = dir("change");
        let f = d.join("rules.conf");
        std::fs::write(&f, "SecRuleEngine On\n").expect("write");
        let inputs = Inputs {
            files: vec![f.clone()],
            globs: vec![],
        };
        let mut w = Watcher::new(inputs, after_writes());
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
        let mut w = Watcher::new(
            Inputs {
                files: vec![f.clone()],
                globs: vec![],
            },
            after_writes(),
        );
        // Replaced by a rename, same length (how `waf compile -o` and most
        // deployments write).
        let tmp = d.join("rules.conf.tmp");
        std::fs::write(&tmp, "B\n").expect("write");
        std::fs::rename(&tmp, &f).expect("rename");
        assert_eq!(w.poll(), None);
        assert!(w.poll().is_some(), "a renamed-in file is a change");
        let mut w = Watcher::new(
            Inputs {
                files: vec![f.clone()],
                globs: vec![],
            },
            after_writes(),
        );
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
            files: vec![d.join("a.conf")],
            globs: vec![(pattern.clone(), vec![d.join("a.conf")])],
        };
        let mut w = Watcher::new(inputs, after_writes());
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
        let inputs = Inputs {
            files: vec![f.clone()],
            globs: vec![],
        };
        // The compilation started after the write above: nothing stale.
        let mut w = Watcher::new(inputs.clone(), after_writes());
        assert_eq!((w.poll(), w.poll()), (None, None));
        // It started before: the file may have changed after it was read.
        let mut w = Watcher::new(inputs, before());
        assert_eq!(w.poll(), None);
        assert_eq!(
            w.poll(),
            Some("a file, while the rules compiled".to_string())
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
