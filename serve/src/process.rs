//! The process metrics every Prometheus client library exports
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, ...), so
//! that the dashboards and alerts written for them (memory after reloads,
//! file descriptors near their limit) work on `waf serve` unchanged.
//!
//! Read from `/proc/self` at each scrape, as the Go client does; on a
//! system without it (not Linux), or for a file that cannot be read, the
//! metrics concerned are left out rather than reported as 0.

use std::fmt::Write;

/// Clock ticks per second of `/proc`'s CPU times: the kernel's `USER_HZ`,
/// 100 on every architecture Linux runs `waf` on (what the Prometheus Go
/// client assumes too; `sysconf` would need `unsafe`).
const USER_HZ: f64 = 100.0;

/// What `/proc/self/stat` says about the process.
#[derive(Debug, PartialEq)]
struct Stat {
    /// User and system CPU time, in clock ticks.
    cpu_ticks: u64,
    /// Start time, in clock ticks after boot.
    start_ticks: u64,
    virtual_bytes: u64,
    threads: u64,
}

/// Parses `/proc/self/stat`: the fields after the command name, which is in
/// parentheses and may itself hold spaces and parentheses (so the text
/// after its last `)` is read).
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name; proc(5) numbers from 1.
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        cpu_ticks: field(14)? + field(15)?,
        threads: field(20)?,
        start_ticks: field(22)?,
        virtual_bytes: field(23)?,
    })
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn parse_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_ascii_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib * 1024)
}

/// The soft limit on open files from `/proc/self/limits` (`None` when
/// unlimited or unreadable).
fn parse_max_fds(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The boot time (`btime`) from `/proc/stat`, in seconds since the epoch.
fn parse_boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// Appends the process metrics to `s`.
pub(crate) fn render(s: &mut String) {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = writeln!(
            s,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    let stat = read("/proc/self/stat").and_then(|t| parse_stat(&t));
    if let Some(st) = &stat {
        metric(
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            st.cpu_ticks as f64 / USER_HZ,
        );
        metric(
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            st.virtual_bytes as f64,
        );
        metric(
            "process_threads",
            "gauge",
            "Number of OS threads in the process.",
            st.threads as f64,
        );
    }
    if let Some(rss) = read("/proc/self/status").and_then(|t| parse_rss(&t)) {
        metric(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            rss as f64,
        );
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        // The directory's own descriptor, open while it is read, is left out.
        let open = dir.count().saturating_sub(1);
        metric(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            open as f64,
        );
    }
    if let Some(max) = read("/proc/self/limits").and_then(|t| parse_max_fds(&t)) {
        metric(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max as f64,
        );
    }
    let boot = read("/proc/stat").and_then(|t| parse_boot_time(&t));
    if let (Some(st), Some(boot)) = (&stat, boot) {
        metric(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            boot as f64 + st.start_ticks as f64 / USER_HZ,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        // A command name with a space and a parenthesis, as a thread may
        // name itself.
        let text = "4242 (waf (serve) x) S 1 4242 4242 0 -1 4194560 2770 0 0 0 \
                    150 25 0 0 20 0 7 0 123456 219734016 20050 18446744073709551615 \
                    1 1 0 0 0 0 0 4096 17408 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                cpu_ticks: 175,
                start_ticks: 123456,
                virtual_bytes: 219734016,
                threads: 7,
            })
        );
        assert_eq!(parse_stat("4242 (waf) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn status_limits_and_boot_time() {
        let status = "Name:\twaf\nVmPeak:\t  300000 kB\nVmRSS:\t   80124 kB\nThreads:\t7\n";
        assert_eq!(parse_rss(status), Some(80124 * 1024));
        assert_eq!(parse_rss("VmRSS:\t80124 pages\n"), None);
        assert_eq!(parse_rss("Name:\twaf\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1048576              1048576              files     \n";
        assert_eq!(parse_max_fds(limits), Some(1048576));
        assert_eq!(
            parse_max_fds(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nintr 5\nbtime 1764400000\nprocesses 9\n"),
            Some(1764400000)
        );
        assert_eq!(parse_boot_time("cpu  1 2 3\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_described() {
        let mut s = String::new();
        render(&mut s);
        let value = |name: &str| -> f64 {
            let line = s
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} missing in:\n{s}"));
            line[name.len() + 1..].parse().expect("a number")
        };
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_threads") >= 1.0);
        assert!(value("process_cpu_seconds_total") >= 0.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        let start = value("process_start_time_seconds");
        assert!(
            start <= now + 1.0 && start > now - 3600.0,
            "{start} vs {now}"
        );
    }
}
