//! go-ftw's way, over real HTTP: each stage's bytes go to a running WAF
//! (`waf serve`, nginx + ModSecurity, any server in front of an
//! albedo-like backend); the status is read from its response, and the
//! stage's log lines are taken from the WAF's error log between two marker
//! requests (an `X-CRS-Test: <id>` header that rule 999999 logs), as go-ftw
//! does. Stages run one at a time, so the markers bracket one request.
//!
//! Why this exists beside go-ftw: go-ftw (and albedo) are Go modules, and
//! where the Go module proxy refuses them this runner and [`serve_backend`]
//! give the same measurement with the same test files and overrides.

use super::backend;
use super::frontend;
use super::model::Input;
use super::request;
use super::stage::Outcome;
use regex::Regex;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The rule that logs go-ftw's marker requests (as in CRS's test setups).
pub const MARKER_RULE: &str = r#"SecRule REQUEST_HEADERS:X-CRS-Test "@rx ^.*$" "id:999999,phase:1,pass,t:none,log,msg:'X-CRS-Test %{MATCHED_VAR}'""#;

/// [`super::CRS_TEST_CONFIG`] for a server: the includes made absolute for
/// the CRS checkout `crs`, and [`MARKER_RULE`] before them. The same text
/// loads in ModSecurity v3 and in this engine.
pub fn crs_server_config(crs: &Path) -> String {
    let mut out = String::new();
    let mut marker_written = false;
    for line in super::CRS_TEST_CONFIG.lines() {
        if let Some(rest) = line.strip_prefix("Include ") {
            if !marker_written {
                out.push_str(MARKER_RULE);
                out.push('\n');
                marker_written = true;
            }
            out.push_str(&format!("Include {}\n", crs.join(rest.trim()).display()));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Where stages are sent and where their log lines are read.
#[derive(Clone, Debug)]
pub struct Target {
    /// The WAF's listening address.
    pub addr: SocketAddr,
    /// Its error log.
    pub log: PathBuf,
    /// How long to wait for a response (a request the server keeps waiting
    /// for is an error after this, as in go-ftw) and for a marker's log line.
    pub timeout: Duration,
}

/// The unread end of the error log.
pub struct LogTail {
    path: PathBuf,
    offset: u64,
    pending: String,
}

impl LogTail {
    /// Starts at the current end of `path` (which may not exist yet).
    pub fn new(path: &Path) -> LogTail {
        let offset = std::fs::metadata(path).map_or(0, |m| m.len());
        LogTail {
            path: path.to_path_buf(),
            offset,
            pending: String::new(),
        }
    }

    /// Appends what was written since the last read to `pending`.
    fn read(&mut self) {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return;
        };
        let len = f.metadata().map_or(0, |m| m.len());
        if len < self.offset {
            // Truncated or rotated: start over.
            self.offset = 0;
        }
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        if f.read_to_end(&mut buf).is_ok() {
            self.offset += buf.len() as u64;
            self.pending.push_str(&String::from_utf8_lossy(&buf));
        }
    }

    /// Waits (up to `timeout`) for a complete line containing `needle`;
    /// returns the lines before it and drops it, keeping what follows.
    fn until(&mut self, needle: &str, timeout: Duration) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            self.read();
            if let Some(at) = self.pending.find(needle) {
                if let Some(nl) = self.pending[at..].find('\n') {
                    let end = at + nl + 1;
                    let start = self.pending[..at].rfind('\n').map_or(0, |i| i + 1);
                    let before: Vec<String> =
                        self.pending[..start].lines().map(str::to_string).collect();
                    self.pending.drain(..end);
                    return Ok(before);
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the marker `{needle}` did not reach {} within {:?} (is rule 999999 loaded, and is this the WAF's error log?)",
                    self.path.display(),
                    timeout
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

static MARKERS: AtomicU64 = AtomicU64::new(0);

fn marker_id() -> String {
    format!(
        "waf-ftw-{}-{}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

fn ids_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r#"\[id "(\d+)"\]"#).unwrap_or_else(|_| unreachable!()))
}

/// The response to a marker request; its log line ends the wait.
fn send_marker(t: &Target, id: &str) -> Result<(), String> {
    let req = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: waf-ftw\r\nAccept: */*\r\nX-CRS-Test: {id}\r\nConnection: close\r\n\r\n"
    );
    exchange(t, req.as_bytes()).map(|_| ())
}

/// A response as the client saw it.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

/// Sends `bytes` and reads one response.
fn exchange(t: &Target, bytes: &[u8]) -> Result<Answer, String> {
    let mut s = TcpStream::connect_timeout(&t.addr, t.timeout)
        .map_err(|e| format!("cannot connect to {}: {e}", t.addr))?;
    let _ = s.set_read_timeout(Some(t.timeout));
    let _ = s.set_write_timeout(Some(t.timeout));
    let _ = s.set_nodelay(true);
    s.write_all(bytes)
        .map_err(|e| format!("sending the request: {e}"))?;
    let msg = read_message(&mut s, true, t.timeout)?;
    parse_response(&msg)
}

fn parse_response(msg: &[u8]) -> Result<Answer, String> {
    let head_end = find(msg, b"\r\n\r\n").ok_or("the response has no complete head")?;
    let line_end = find(msg, b"\r\n").unwrap_or(head_end);
    let line = String::from_utf8_lossy(&msg[..line_end]);
    let mut parts = line.splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(format!("not an HTTP status line: `{line}`"));
    };
    if !version.starts_with("HTTP/") {
        return Err(format!("not an HTTP status line: `{line}`"));
    }
    let status = code
        .parse::<u16>()
        .map_err(|_| format!("not an HTTP status line: `{line}`"))?;
    Ok(Answer {
        status,
        body: msg[head_end + 4..].to_vec(),
    })
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn header_value<'a>(head: &'a [u8], name: &str) -> Option<&'a [u8]> {
    head.split(|&b| b == b'\n').skip(1).find_map(|l| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        let colon = l.iter().position(|&b| b == b':')?;
        l[..colon]
            .eq_ignore_ascii_case(name.as_bytes())
            .then(|| l[colon + 1..].trim_ascii())
    })
}

/// Reads one HTTP/1.x message: the head, then a body framed by
/// `Content-Length`, `Transfer-Encoding: chunked` or (responses) the end of
/// the connection. An error when nothing usable arrives in time.
fn read_message(s: &mut TcpStream, response: bool, timeout: Duration) -> Result<Vec<u8>, String> {
    const MAX: usize = 64 << 20;
    let deadline = Instant::now() + timeout;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let mut read_more = |buf: &mut Vec<u8>| -> Result<bool, String> {
        if Instant::now() >= deadline {
            return Err("timed out waiting for the response".into());
        }
        match s.read(&mut chunk) {
            Ok(0) => Ok(false),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > MAX {
                    return Err("the message is over 64 MiB".into());
                }
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Err("timed out waiting for the response".into())
            }
            Err(e) => Err(format!("reading the response: {e}")),
        }
    };
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        if !read_more(&mut buf)? {
            return Err(if buf.is_empty() {
                "the server closed the connection without a response".into()
            } else {
                "the connection closed in the middle of the response head".into()
            });
        }
    };
    let head = buf[..head_end].to_vec();
    let status_no_body = response && {
        let code = head.get(9..12).unwrap_or_default();
        code.starts_with(b"1") || code == b"204" || code == b"304"
    };
    if status_no_body {
        buf.truncate(head_end);
        return Ok(buf);
    }
    let chunked = header_value(&head, "transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().ends_with(b"chunked"));
    if chunked {
        // Complete when the last chunk and the end of trailers arrived.
        while !buf[head_end..].starts_with(b"0\r\n\r\n")
            && find(&buf[head_end..], b"\r\n0\r\n\r\n").is_none()
        {
            if !read_more(&mut buf)? {
                break;
            }
        }
        let body = dechunk(&buf[head_end..]);
        buf.truncate(head_end);
        buf.extend_from_slice(&body);
        return Ok(buf);
    }
    if let Some(len) = header_value(&head, "content-length")
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        while buf.len() < head_end + len {
            if !read_more(&mut buf)? {
                break;
            }
        }
        buf.truncate(head_end + len);
        return Ok(buf);
    }
    if !response {
        buf.truncate(head_end);
        return Ok(buf);
    }
    // A response without framing ends with the connection.
    loop {
        match read_more(&mut buf) {
            Ok(true) => {}
            Ok(false) => return Ok(buf),
            Err(_) => return Ok(buf),
        }
    }
}

/// The data of a chunked body (extensions and trailers dropped).
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = find(b, b"\r\n") {
        let size_text = String::from_utf8_lossy(&b[..nl]);
        let size = size_text.split(';').next().unwrap_or("").trim();
        let Ok(n) = usize::from_str_radix(size, 16) else {
            break;
        };
        b = &b[nl + 2..];
        if n == 0 || b.len() < n {
            out.extend_from_slice(&b[..n.min(b.len())]);
            break;
        }
        out.extend_from_slice(&b[..n]);
        b = b.get(n + 2..).unwrap_or_default();
    }
    out
}

/// Runs one stage against `t`, reading its log lines from `tail`.
pub fn execute(t: &Target, tail: &mut LogTail, input: &Input) -> Outcome {
    let bytes = match request::build(input) {
        Ok(b) => b,
        Err(e) => return Outcome::unsendable(&e),
    };
    let mut out = Outcome {
        waf: "over HTTP",
        ..Outcome::default()
    };
    let (start, end) = (marker_id(), marker_id());
    // Everything logged before the start marker belongs to earlier stages.
    if let Err(e) = send_marker(t, &start).and_then(|()| tail.until(&start, t.timeout).map(|_| ()))
    {
        out.error = Some(format!("start marker: {e}"));
        out.status_source = "harness".into();
        return out;
    }
    match exchange(t, &bytes) {
        Ok(a) => {
            out.status = Some(a.status);
            out.status_source = format!("HTTP response from {}", t.addr);
            out.response = Some(a.body);
        }
        Err(e) => {
            out.error = Some(e);
            out.status_source = "no response".into();
        }
    }
    let lines = match send_marker(t, &end).and_then(|()| tail.until(&end, t.timeout)) {
        Ok(l) => l,
        Err(e) => {
            out.error = Some(format!("end marker: {e}"));
            return out;
        }
    };
    for line in lines.into_iter().filter(|l| !l.contains("X-CRS-Test")) {
        for c in ids_re().captures_iter(&line) {
            if let Some(id) = c.get(1).and_then(|m| m.as_str().parse::<u64>().ok()) {
                if !out.logged_ids.contains(&id) {
                    out.logged_ids.push(id);
                }
            }
        }
        if line.contains("[id \"") {
            out.log.push(line);
        }
    }
    out
}

/// Serves CRS's test backend (albedo's behaviour, as [`backend::respond`]
/// emulates it) on `listener` until the process ends: `POST /reflect`
/// answers the response its JSON body describes, anything else an empty
/// 200. Keep-alive; one thread per connection.
pub fn serve_backend(listener: TcpListener) {
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || backend_connection(stream));
    }
}

fn backend_connection(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let idle = Duration::from_secs(60);
    let _ = s.set_read_timeout(Some(idle));
    loop {
        let Ok(msg) = read_message(&mut s, false, idle) else {
            return;
        };
        let raw = request::split(&msg);
        let rec = frontend::receive(&raw);
        let close = rec
            .request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case(b"close"))
            || rec.request.version == b"HTTP/1.0";
        let r = backend::respond(&rec.request);
        let mut out = format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status)).into_bytes();
        for (k, v) in &r.headers {
            if k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("connection") {
                continue;
            }
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n", r.body.len()).as_bytes());
        if close {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&r.body);
        if s.write_all(&out).is_err() || close {
            return;
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(dechunk(b"3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n"), b"abcde");
        assert_eq!(dechunk(b"zz\r\n"), b"");
    }

    #[test]
    fn responses_are_parsed() {
        let a = parse_response(b"HTTP/1.1 403 Forbidden\r\nA: b\r\n\r\nblocked").expect("ok");
        assert_eq!((a.status, a.body.as_slice()), (403, &b"blocked"[..]));
        assert!(parse_response(b"SSH-2.0\r\n\r\n").is_err());
    }

    #[test]
    fn the_server_config_has_the_marker_rule_and_absolute_includes() {
        let c = crs_server_config(Path::new("/opt/crs"));
        assert!(
            c.contains("Include /opt/crs/crs-setup.conf.example\n"),
            "{c}"
        );
        assert!(c.contains("Include /opt/crs/rules/*.conf\n"), "{c}");
        assert_eq!(c.matches("id:999999").count(), 1);
        assert!(c.find("id:999999") < c.find("Include"));
    }

    #[test]
    fn the_log_tail_returns_the_lines_between_markers() {
        let p = std::env::temp_dir().join(format!("waf-ftw-tail-{}", std::process::id()));
        std::fs::write(&p, "old line\n").expect("write");
        let mut t = LogTail::new(&p);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .expect("open");
        f.write_all(b"x [msg \"X-CRS-Test A\"]\n[id \"1\"] one\n[id \"2\"] two\nx [msg \"X-CRS-Test B\"]\nlater\n")
            .expect("write");
        assert_eq!(
            t.until("X-CRS-Test A", Duration::from_secs(1)).expect("A"),
            Vec::<String>::new()
        );
        assert_eq!(
            t.until("X-CRS-Test B", Duration::from_secs(1)).expect("B"),
            ["[id \"1\"] one", "[id \"2\"] two"]
        );
        assert!(t.until("X-CRS-Test C", Duration::from_millis(20)).is_err());
        let _ = std::fs::remove_file(&p);
    }
}
