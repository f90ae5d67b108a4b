//! The access log (`--access-log FILE`): one JSON object per request, every
//! request, blocked or not, with what the WAF did to it, for the tools that
//! read a proxy's access log (Loki, Elasticsearch, GoAccess's JSON mode).
//! Written as the error log is (a thread of its own, a bounded queue; lines
//! dropped when it falls behind are counted).
//!
//! Fields, in this order: `ts` (seconds since the epoch, as Caddy's JSON
//! logs), `client_ip` (after the trusted proxies), `peer_ip` (only when it
//! differs: the trusted proxy it came through), `method`, `host`, `uri`,
//! `proto`, `status` (0 when no response was made: the connection failed;
//! 499, as nginx logs it, when the client left before its answer),
//! `duration` (seconds, until the response headers were ready), `waf_time`
//! (the engine's seconds on it), `unique_id`, `site` (manifest), `upstream`
//! (the server the request went to, as nginx's `$upstream_addr`),
//! `upstream_time` (seconds from sending it there to the response headers,
//! as nginx's `$upstream_header_time`), `rule_id`
//! (the rule whose intervention answered), `custom_rule` (the manifest
//! custom rule that answered or allowed it), `user_agent`, `referer`.
//!
//! The request handler fills a note as it learns these (which site, which
//! transaction, which rule), through a task-local: no signature in the
//! request path carries it.

use crate::log::ErrorLog;
use std::cell::RefCell;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What the handler learnt about a request, for its access-log line.
#[derive(Default)]
pub(crate) struct Note {
    pub client: Option<IpAddr>,
    pub site: Option<std::sync::Arc<crate::metrics::SiteCounts>>,
    /// Answered by the WAF itself (an intervention, a custom rule's block).
    pub blocked: bool,
    pub upstream: Option<std::sync::Arc<str>>,
    /// From sending the request to the upstream server to its response
    /// headers (the last server tried).
    pub upstream_time: Option<Duration>,
    pub unique_id: Option<String>,
    pub waf_time: Duration,
    pub rule_id: Option<u64>,
    pub custom_rule: Option<String>,
}

tokio::task_local! {
    static NOTE: RefCell<Note>;
}

/// Updates the note of the request running on this task (nothing outside
/// [`noted`]).
pub(crate) fn note(f: impl FnOnce(&mut Note)) {
    let _ = NOTE.try_with(|n| f(&mut n.borrow_mut()));
}

/// Runs `request` with a note to fill; its output and the note, and
/// `outcome` back, to record once the answer's status is known. If the
/// request is dropped before its end (hyper drops a request whose client
/// left), `outcome` is recorded as it drops, with nginx's 499, after the
/// request itself is dropped (whatever it notes as it goes counts).
pub(crate) async fn noted<F>(request: F, outcome: Outcome) -> (F::Output, Note, Outcome)
where
    F: Future + Unpin,
{
    let running = Running {
        request: Some(request),
        outcome: Some(outcome),
    };
    NOTE.scope(RefCell::new(Note::default()), running).await
}

/// [`noted`]'s request inside the note's scope.
struct Running<F> {
    request: Option<F>,
    outcome: Option<Outcome>,
}

impl<F: Future + Unpin> Future for Running<F> {
    type Output = (F::Output, Note, Outcome);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(request) = self.request.as_mut() else {
            // Polled after its end: hyper never does.
            return Poll::Pending;
        };
        let out = std::task::ready!(Pin::new(request).poll(cx));
        self.request = None;
        let note = take_note();
        match self.outcome.take() {
            Some(outcome) => Poll::Ready((out, note, outcome)),
            None => Poll::Pending,
        }
    }
}

impl<F> Drop for Running<F> {
    fn drop(&mut self) {
        if let Some(outcome) = self.outcome.take() {
            // The request first: its own guards still fill the note.
            self.request = None;
            outcome.record(&take_note(), CLIENT_CLOSED);
        }
    }
}

/// nginx's status for a request whose client closed the connection before
/// the answer (none was sent: the status is for the logs).
pub(crate) const CLIENT_CLOSED: u16 = 499;

fn take_note() -> Note {
    NOTE.try_with(|n| std::mem::take(&mut *n.borrow_mut()))
        .unwrap_or_default()
}

/// What a request's end records besides the note: its site's counts and,
/// with an access log, its line.
pub(crate) struct Outcome {
    line: Option<(ErrorLog, Seen)>,
    start: Instant,
}

impl Outcome {
    /// Taken before the request is handed over (`access`: the access log,
    /// if there is one).
    pub(crate) fn of<B>(access: Option<ErrorLog>, req: &hyper::Request<B>, peer: IpAddr) -> Self {
        Outcome {
            line: access.map(|log| (log, Seen::of(req, peer))),
            start: Instant::now(),
        }
    }

    /// Records the request's end with the status its client got (0: the
    /// connection failed before a response).
    pub(crate) fn record(self, note: &Note, status: u16) {
        if let Some(site) = &note.site {
            site.record(status, note.blocked);
        }
        if let Some((log, seen)) = self.line {
            log.write(line(&seen, note, status, self.start.elapsed()));
        }
    }
}

/// The request line and headers the line needs, taken before the request
/// is handed over.
pub(crate) struct Seen {
    pub peer: IpAddr,
    pub method: String,
    pub host: String,
    pub uri: String,
    pub proto: &'static str,
    pub user_agent: String,
    pub referer: String,
}

impl Seen {
    pub(crate) fn of<B>(req: &hyper::Request<B>, peer: IpAddr) -> Seen {
        let header = |name: hyper::header::HeaderName| {
            req.headers()
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        Seen {
            peer,
            method: req.method().as_str().to_string(),
            // HTTP/2 carries the host in `:authority`.
            host: header(hyper::header::HOST)
                .or_else(|| req.uri().authority().map(|a| a.as_str().to_string()))
                .unwrap_or_default(),
            uri: req
                .uri()
                .path_and_query()
                .map_or_else(|| req.uri().to_string(), |p| p.as_str().to_string()),
            proto: std::str::from_utf8(crate::proxy::version_bytes(req.version())).unwrap_or(""),
            user_agent: header(hyper::header::USER_AGENT).unwrap_or_default(),
            referer: header(hyper::header::REFERER).unwrap_or_default(),
        }
    }
}

/// The access-log line of a request: one JSON object, its fields in the
/// documented order.
pub(crate) fn line(seen: &Seen, note: &Note, status: u16, duration: Duration) -> String {
    use serde_json::Value;
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as f64
        / 1e3;
    let client = note.client.unwrap_or(seen.peer);
    let text = |s: &str| Value::from(s);
    let mut fields: Vec<(&str, Value)> =
        vec![("ts", ts.into()), ("client_ip", text(&client.to_string()))];
    if client != seen.peer {
        fields.push(("peer_ip", text(&seen.peer.to_string())));
    }
    fields.extend([
        ("method", text(&seen.method)),
        ("host", text(&seen.host)),
        ("uri", text(&seen.uri)),
        ("proto", text(seen.proto)),
        ("status", status.into()),
        ("duration", seconds(duration).into()),
        ("waf_time", seconds(note.waf_time).into()),
    ]);
    if let Some(v) = &note.unique_id {
        fields.push(("unique_id", text(v)));
    }
    if let Some(v) = &note.site {
        fields.push(("site", text(&v.name)));
    }
    if let Some(v) = &note.upstream {
        fields.push(("upstream", text(v)));
    }
    if let Some(t) = note.upstream_time {
        fields.push(("upstream_time", seconds(t).into()));
    }
    if let Some(id) = note.rule_id {
        fields.push(("rule_id", id.into()));
    }
    if let Some(v) = &note.custom_rule {
        fields.push(("custom_rule", text(v)));
    }
    fields.push(("user_agent", text(&seen.user_agent)));
    fields.push(("referer", text(&seen.referer)));
    let mut out = String::from("{");
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(*k).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    }
    out.push('}');
    out
}

/// Seconds, to the microsecond.
fn seconds(d: Duration) -> f64 {
    d.as_micros() as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> hyper::Request<()> {
        hyper::Request::builder()
            .uri("/slow")
            .header("host", "shop.example")
            .body(())
            .expect("request")
    }

    #[tokio::test]
    async fn the_note_is_filled_inside_the_scope_only() {
        note(|n| n.rule_id = Some(1));
        let outcome = Outcome::of(None, &request(), "10.0.0.5".parse().expect("ip"));
        let ((), n, _) = noted(
            Box::pin(async {
                note(|n| n.rule_id = Some(942100));
                tokio::task::yield_now().await;
                note(|n| n.site = Some(crate::metrics::SiteCounts::new("shop")));
            }),
            outcome,
        )
        .await;
        let site = n.site.as_ref().map(|s| s.name.to_string());
        assert_eq!((n.rule_id, site.as_deref()), (Some(942100), Some("shop")));
    }

    /// What an access log wrote.
    #[derive(Clone, Default)]
    struct Written(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut w) = self.0.lock() {
                w.extend_from_slice(buf);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Notes the WAF's time when dropped, as the proxy's transaction does
    /// when hyper drops a request.
    struct LoggedOnDrop;

    impl Drop for LoggedOnDrop {
        fn drop(&mut self) {
            note(|n| n.waf_time += Duration::from_micros(1500));
        }
    }

    #[tokio::test]
    async fn a_request_dropped_before_its_end_is_recorded_with_499() {
        let written = Written::default();
        let log = ErrorLog::to_writer(Box::new(written.clone()));
        let outcome = Outcome::of(
            Some(log.clone()),
            &request(),
            "10.0.0.5".parse().expect("ip"),
        );
        let request = Box::pin(async {
            note(|n| n.rule_id = Some(942100));
            let _logged = LoggedOnDrop;
            // An upstream that never answers.
            std::future::pending::<()>().await;
        });
        let gave_up =
            tokio::time::timeout(Duration::from_millis(20), noted(request, outcome)).await;
        assert!(gave_up.is_err());
        assert!(log.flush(Duration::from_secs(5)).await);
        let text = written.0.lock().map(|w| w.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let v: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON");
        assert_eq!(v["status"], 499);
        assert_eq!(v["uri"], "/slow");
        assert_eq!(v["rule_id"], 942100);
        // Noted by the request as it dropped, before the line was made.
        assert_eq!(v["waf_time"], 0.0015);
    }

    #[test]
    fn a_line_is_one_json_object_with_the_documented_fields() {
        let req = hyper::Request::builder()
            .uri("/search?q=%27%22")
            .header("host", "shop.example")
            .header("user-agent", "curl/8 \"quoted\"")
            .body(())
            .expect("request");
        let seen = Seen::of(&req, "10.0.0.5".parse().expect("ip"));
        let note = Note {
            client: Some("203.0.113.7".parse().expect("ip")),
            unique_id: Some("abc".into()),
            upstream: Some("http://10.0.0.5:8080/".into()),
            upstream_time: Some(Duration::from_micros(2500)),
            rule_id: Some(949110),
            waf_time: Duration::from_micros(1234),
            ..Note::default()
        };
        let line = line(&seen, &note, 403, Duration::from_millis(3));
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        // Exactly these fields (absent ones: no site, no custom rule), in
        // the documented order (a JSON map would sort them).
        let want = [
            "ts",
            "client_ip",
            "peer_ip",
            "method",
            "host",
            "uri",
            "proto",
            "status",
            "duration",
            "waf_time",
            "unique_id",
            "upstream",
            "upstream_time",
            "rule_id",
            "user_agent",
            "referer",
        ];
        let object = v.as_object().expect("object");
        assert_eq!(object.len(), want.len(), "{line}");
        let at: Vec<usize> = want
            .iter()
            .map(|k| {
                line.find(&format!("\"{k}\":"))
                    .unwrap_or_else(|| panic!("{k} in {line}"))
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
        assert_eq!(v["client_ip"], "203.0.113.7");
        assert_eq!(v["peer_ip"], "10.0.0.5");
        assert_eq!(v["uri"], "/search?q=%27%22");
        assert_eq!(v["status"], 403);
        assert_eq!(v["waf_time"], 0.001234);
        assert_eq!(v["upstream_time"], 0.0025);
        assert_eq!(v["user_agent"], "curl/8 \"quoted\"");
    }
}
