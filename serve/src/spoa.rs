//! `waf spoa`: the engine as an HAProxy SPOE agent (Stream Processing
//! Offload). HAProxy sends each request's line, headers and buffered body in
//! a `NOTIFY` frame; the agent runs phases 1, 2 and 5 and answers with
//! transaction variables that HAProxy's rules act on
//! (`connectors/haproxy/`): `txn.waf.action` (`allow`, `deny`, `redirect`,
//! `drop`), `txn.waf.status`, `txn.waf.rule_id`, `txn.waf.url`, and
//! `txn.waf.body_truncated` when HAProxy's buffer held less than the body's
//! `Content-Length` (the engine then saw only that part, and says so in the
//! error log: never silently treated as complete). Response phases cannot
//! run here: HAProxy's SPOE sends request data only in this setup.
//!
//! The protocol is the `spop` crate's (frames, codec, handshake
//! negotiation); nothing of SPOP is parsed by hand here but `req.hdrs_bin`,
//! HAProxy's header-list encoding (varint-prefixed names and values).

use crate::log::ErrorLog;
use crate::rules::Rules;
use futures_util::{SinkExt, StreamExt};
use spop::frame::{FramePayload, FrameType, Message};
use spop::frames::{Ack, AgentDisconnect, AgentHello, FrameCapabilities, HaproxyHello};
use spop::{SpopCodec, StatusCode, TypedData, VarScope, MAX_FRAME_SIZE_LIMIT};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Framed;

/// What the agent decided for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// `allow`, `deny`, `redirect` or `drop`.
    pub action: &'static str,
    /// The intervention's status (0 when allowed).
    pub status: u16,
    /// The rule that decided (0 when allowed or for a body limit).
    pub rule_id: u64,
    /// The redirect URL.
    pub url: String,
    /// HAProxy's buffer held less than the body's `Content-Length`.
    pub body_truncated: bool,
}

/// The request data of a `waf-request` message (see `connectors/haproxy/spoe-waf.conf`).
fn arg<'m>(m: &'m Message, name: &str) -> Option<&'m TypedData> {
    m.get(name).filter(|v| !matches!(v, TypedData::Null))
}

fn text(v: Option<&TypedData>) -> String {
    match v {
        Some(TypedData::String(s)) => s.clone(),
        Some(TypedData::Binary(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(TypedData::IPv4(a)) => a.to_string(),
        Some(TypedData::IPv6(a)) => a.to_string(),
        Some(TypedData::Int32(n)) => n.to_string(),
        Some(TypedData::UInt32(n)) => n.to_string(),
        Some(TypedData::Int64(n)) => n.to_string(),
        Some(TypedData::UInt64(n)) => n.to_string(),
        Some(TypedData::Bool(b)) => b.to_string(),
        Some(TypedData::Null) | None => String::new(),
    }
}

fn bytes(v: Option<&TypedData>) -> Vec<u8> {
    match v {
        Some(TypedData::Binary(b)) => b.clone(),
        Some(TypedData::String(s)) => s.clone().into_bytes(),
        _ => Vec::new(),
    }
}

fn number(v: Option<&TypedData>) -> u64 {
    match v {
        Some(TypedData::Int32(n)) => u64::try_from(*n).unwrap_or(0),
        Some(TypedData::UInt32(n)) => u64::from(*n),
        Some(TypedData::Int64(n)) => u64::try_from(*n).unwrap_or(0),
        Some(TypedData::UInt64(n)) => *n,
        other => text(other).trim().parse().unwrap_or(0),
    }
}

/// HAProxy's `req.hdrs_bin`: (varint length, name, varint length, value)
/// pairs ended by two empty ones. `None` when the encoding is broken.
pub fn parse_headers(mut b: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    loop {
        if b.is_empty() {
            return Some(out);
        }
        let (rest, name_len) = spop::decode_varint(b).ok()?;
        let name_len = usize::try_from(name_len).ok()?;
        let name = rest.get(..name_len)?;
        let (rest, value_len) = spop::decode_varint(rest.get(name_len..)?).ok()?;
        let value_len = usize::try_from(value_len).ok()?;
        let value = rest.get(..value_len)?;
        b = rest.get(value_len..)?;
        if name.is_empty() && value.is_empty() {
            return Some(out);
        }
        out.push((name.to_vec(), value.to_vec()));
    }
}

/// Runs phases 1, 2 and 5 on the request a `waf-request` message carries.
pub fn decide(rules: &Rules, m: &Message, log: &ErrorLog) -> Decision {
    let rs = rules.current();
    let mut tx = rs.transaction();
    let id = text(arg(m, "id"));
    if !id.is_empty() {
        tx.set_unique_id(&id);
    }
    tx.process_connection(
        &text(arg(m, "src-ip")),
        u16::try_from(number(arg(m, "src-port"))).unwrap_or(0),
        &text(arg(m, "dst-ip")),
        u16::try_from(number(arg(m, "dst-port"))).unwrap_or(0),
    );
    let mut target = text(arg(m, "path"));
    let query = text(arg(m, "query"));
    if !query.is_empty() {
        target.push('?');
        target.push_str(&query);
    }
    let version = text(arg(m, "version"));
    let protocol = format!("HTTP/{}", if version.is_empty() { "1.1" } else { &version });
    tx.process_uri(
        target.as_bytes(),
        text(arg(m, "method")).as_bytes(),
        protocol.as_bytes(),
    );
    let headers = parse_headers(&bytes(arg(m, "headers")));
    let mut content_length = None;
    for (name, value) in headers.iter().flatten() {
        if name.eq_ignore_ascii_case(b"content-length") {
            content_length = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok());
        }
        tx.add_request_header(name, value);
    }
    if headers.is_none() {
        log.write(format!(
            "waf spoa: the headers HAProxy sent (req.hdrs_bin) are not well formed; inspected without them [unique_id \"{}\"]",
            tx.unique_id()
        ));
    }
    tx.process_request_headers();
    let body = bytes(arg(m, "body"));
    let body_truncated = content_length.is_some_and(|n| n > body.len() as u64);
    if tx.intervention().is_none() {
        feed_body(&mut tx, &body, body_truncated);
        if tx.intervention().is_none() {
            tx.process_request_body();
        }
    }
    tx.process_logging();
    for line in tx.log_lines() {
        log.write(line);
    }
    if body_truncated {
        log.write(format!(
            "waf spoa: request body cut short by HAProxy's buffer: {} of {} bytes inspected (raise tune.bufsize) [uri \"{}\"] [unique_id \"{}\"]",
            body.len(),
            content_length.unwrap_or(0),
            String::from_utf8_lossy(tx.uri_raw()).escape_debug(),
            tx.unique_id()
        ));
    }
    match tx.intervention() {
        None => Decision {
            action: "allow",
            status: 0,
            rule_id: 0,
            url: String::new(),
            body_truncated,
        },
        Some(i) => {
            let action = match i.action {
                "drop" => "drop",
                "redirect" => "redirect",
                _ => "deny",
            };
            Decision {
                action,
                status: i.status,
                rule_id: i.rule_id,
                url: i.url.clone().unwrap_or_default(),
                body_truncated,
            }
        }
    }
}

/// Feeds the request body to the engine as the application will read it
/// (`waf_engine::coding`: decoded when it is gzip or deflate, refused with a
/// 400 or 415 intervention when it does not decode or cannot be decoded);
/// a body HAProxy cut short is inspected as far as it decodes, its end not
/// checked.
fn feed_body(tx: &mut waf_engine::Transaction<'_>, body: &[u8], truncated: bool) {
    let mut feed = waf_engine::coding::RequestBodyFeed::default();
    let append = |tx: &mut waf_engine::Transaction<'_>, b: &[u8]| {
        Ok::<_, std::convert::Infallible>(tx.append_request_body(b))
    };
    let wanted = feed
        .feed(tx, body, append)
        .unwrap_or_else(|never| match never {});
    if wanted {
        feed.finish(tx, !truncated, append)
            .unwrap_or_else(|never| match never {});
    }
}

/// Serves SPOP connections from HAProxy until `stop` turns true; then
/// waits for the connections' tasks to end (each is aborted between two
/// frames: a request being decided is decided), so that nothing writes
/// the persistent collections after this returns.
pub async fn serve(
    listener: TcpListener,
    rules: Arc<Rules>,
    log: ErrorLog,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let (rules, log) = (rules.clone(), log.clone());
                connections.spawn(async move {
                    let _ = connection(stream, rules, log).await;
                });
            }
            // Ended connections are reaped as they end.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
    }
    connections.shutdown().await;
}

type Socket = Framed<TcpStream, SpopCodec>;

async fn disconnect(socket: &mut Socket, status: StatusCode) -> std::io::Result<()> {
    let frame = AgentDisconnect {
        status_code: status.to_u32(),
        message: status.message().to_string(),
    };
    socket.send(Box::new(frame)).await?;
    socket.close().await
}

async fn connection(stream: TcpStream, rules: Arc<Rules>, log: ErrorLog) -> std::io::Result<()> {
    let mut socket = Framed::new(stream, SpopCodec::default());
    while let Some(frame) = socket.next().await {
        let frame = frame?;
        match frame.frame_type() {
            FrameType::HaproxyHello => {
                let Ok(hello) = HaproxyHello::try_from(frame.payload()) else {
                    return disconnect(&mut socket, StatusCode::Invalid).await;
                };
                let Some(version) = hello.negotiate_version() else {
                    return disconnect(&mut socket, StatusCode::BadVersion).await;
                };
                let max_frame_size = match hello.negotiate_max_frame_size(MAX_FRAME_SIZE_LIMIT) {
                    Ok(size) => size,
                    Err(status) => return disconnect(&mut socket, status).await,
                };
                socket.codec_mut().set_max_frame_size(max_frame_size);
                let healthcheck = hello.healthcheck.unwrap_or(false);
                socket
                    .send(Box::new(AgentHello {
                        version,
                        max_frame_size,
                        capabilities: vec![FrameCapabilities::Pipelining],
                    }))
                    .await?;
                if healthcheck {
                    return Ok(());
                }
            }
            FrameType::HaproxyDisconnect => {
                return disconnect(&mut socket, StatusCode::None).await;
            }
            FrameType::Notify => {
                let meta = frame.metadata();
                // The ack goes out after the messages' log lines are
                // written, as the response would in `waf serve`.
                let (ack, logged) = log.logged_during(|| {
                    let mut ack = Ack::new(meta.stream_id, meta.frame_id);
                    if let FramePayload::ListOfMessages(messages) = &frame.payload() {
                        for m in messages.iter().filter(|m| m.name == "waf-request") {
                            // Compiling is not done here; evaluating CRS takes
                            // tens of microseconds: inline on the runtime.
                            let d = decide(&rules, m, &log);
                            ack = ack
                                .set_var(VarScope::Transaction, "action", d.action)
                                .set_var(VarScope::Transaction, "status", u32::from(d.status))
                                .set_var(VarScope::Transaction, "rule_id", d.rule_id)
                                .set_var(VarScope::Transaction, "body_truncated", d.body_truncated);
                            if !d.url.is_empty() {
                                ack = ack.set_var(VarScope::Transaction, "url", d.url.as_str());
                            }
                        }
                    }
                    ack
                });
                if logged {
                    log.wait_written().await;
                }
                socket.send(Box::new(ack)).await?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs the agent on `listen` until Ctrl-C or SIGTERM, on a runtime of its
/// own: what `waf spoa` does. SIGHUP recompiles the rules off the runtime
/// and swaps them in (requests in flight finish on the old ones; rules that
/// do not compile are refused and reported, the running ones stay); SIGUSR1
/// reopens the error log. With `watch_interval`, a change to the rules'
/// files reloads them too (as for `waf serve`). The persistent
/// collections are kept as `collections` says; when the agent stops, after
/// its last request, they are sent to Redis a last time or written to the
/// file.
pub fn run(
    listen: SocketAddr,
    rules: Arc<Rules>,
    log: ErrorLog,
    watch_interval: Option<std::time::Duration>,
    collections: crate::Collections,
    report: impl Fn(&str),
) -> Result<(), crate::ServeError> {
    if collections.file.is_some() && collections.redis.is_some() {
        return Err(crate::ServeError::Collections(
            "a collection file and a Redis to share them exclude each other".into(),
        ));
    }
    let store = crate::rules::collection_store();
    if let Some(max_bytes) = collections.memory {
        store.set_limits(waf_engine::StoreLimits { max_bytes });
    }
    let shared = match &collections.redis {
        Some(url) => Some(Arc::new(
            crate::shared_collections::link(url, collections.redis_ca.as_deref(), log.clone(), WHO)
                .map_err(crate::ServeError::Collections)?,
        )),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(crate::ServeError::Runtime)?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(crate::ServeError::Listen)?;
        report(&format!("listening on {listen}"));
        if let Some(path) = &collections.file {
            log.write(crate::collection_file::read(path, WHO).0);
        }
        let timeout = {
            let rules = rules.clone();
            move || rules.current().program().settings.collection_timeout
        };
        let stop_sharing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        if let Some(shared) = &shared {
            shared.spawn(stop_sharing.clone(), timeout.clone());
        }
        crate::memory::after_start([rules.current()]);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let agent = tokio::spawn(serve(listener, rules.clone(), log.clone(), stopped));
        let watch = watch_interval.map(|interval| crate::Watch {
            interval,
            inputs: {
                let rules = rules.clone();
                move || rules.inputs()
            },
        });
        let reload = {
            let rules = rules.clone();
            move || {
                rules
                    .reload()
                    .map(|()| rules.warnings())
                    .map_err(|e| format!("the running rules stay:\n{e}"))
            }
        };
        crate::until_stopped(reload, |_| {}, watch, std::slice::from_ref(&log), &report).await;
        stop.send_replace(true);
        let _ = agent.await;
        // After the last request: nothing writes the store any more.
        if let Some(shared) = &shared {
            stop_sharing.store(true, std::sync::atomic::Ordering::Relaxed);
            let shared = shared.clone();
            let ttl = timeout();
            let _ = tokio::task::spawn_blocking(move || shared.exchange(ttl)).await;
        }
        if let Some(path) = &collections.file {
            log.write(crate::collection_file::write(path, WHO));
        }
        log.flush(crate::LOG_FLUSH).await;
        Ok(())
    })
}

/// What heads the agent's own lines in the error log.
const WHO: &str = "waf spoa";

#[cfg(test)]
mod tests {
    use super::*;

    fn hdrs(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (n, v) in pairs {
            spop::encode_varint_into(n.len() as u64, &mut b);
            b.extend_from_slice(n.as_bytes());
            spop::encode_varint_into(v.len() as u64, &mut b);
            b.extend_from_slice(v.as_bytes());
        }
        b.extend_from_slice(&[0, 0]);
        b
    }

    fn message(args: Vec<(&str, TypedData)>) -> Message {
        Message {
            name: "waf-request".into(),
            args: args.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }

    fn rules() -> Rules {
        Rules::load(crate::RuleSource::Text {
            name: "spoa.conf".into(),
            text: "SecRuleEngine On\nSecRequestBodyAccess On\nSecRule ARGS \"@contains attack\" \"id:7,phase:2,deny,status:403,log\"\nSecRule REQUEST_URI \"@beginsWith /old\" \"id:8,phase:1,redirect:/new,log\"\n".into(),
        })
        .expect("rules")
    }

    #[test]
    fn headers_in_haproxys_encoding() {
        let h = parse_headers(&hdrs(&[("Host", "a"), ("X", "")])).expect("ok");
        assert_eq!(
            h,
            [
                (b"Host".to_vec(), b"a".to_vec()),
                (b"X".to_vec(), Vec::new())
            ]
        );
        assert_eq!(parse_headers(&[5, b'a']), None, "truncated");
        assert_eq!(parse_headers(&[]), Some(Vec::new()));
    }

    #[test]
    fn decisions_and_a_truncated_body() {
        let r = rules();
        let log = ErrorLog::to_writer(Box::new(std::io::sink()));
        let base = |path: &str, body: &str, cl: &str| {
            message(vec![
                ("id", TypedData::String("req-1".into())),
                ("src-ip", TypedData::IPv4("192.0.2.1".parse().expect("ip"))),
                ("src-port", TypedData::Int32(40000)),
                ("dst-ip", TypedData::IPv4("127.0.0.1".parse().expect("ip"))),
                ("dst-port", TypedData::Int32(80)),
                ("method", TypedData::String("POST".into())),
                ("path", TypedData::String(path.into())),
                ("query", TypedData::String(String::new())),
                ("version", TypedData::String("1.1".into())),
                (
                    "headers",
                    TypedData::Binary(hdrs(&[
                        ("Host", "example.com"),
                        ("Content-Type", "application/x-www-form-urlencoded"),
                        ("Content-Length", cl),
                    ])),
                ),
                ("body", TypedData::Binary(body.as_bytes().to_vec())),
            ])
        };
        let d = decide(&r, &base("/form", "a=attack", "8"), &log);
        assert_eq!(
            (d.action, d.status, d.rule_id, d.body_truncated),
            ("deny", 403, 7, false)
        );
        let d = decide(&r, &base("/form", "a=fine", "6"), &log);
        assert_eq!(d.action, "allow");
        let d = decide(&r, &base("/old/x", "", "0"), &log);
        assert_eq!((d.action, d.url.as_str()), ("redirect", "/new"));
        let d = decide(&r, &base("/form", "a=fine", "60000"), &log);
        assert!(
            d.body_truncated,
            "Content-Length larger than what HAProxy buffered"
        );
    }

    #[test]
    fn compressed_bodies_are_inspected_decoded() {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let r = rules();
        let log = ErrorLog::to_writer(Box::new(std::io::sink()));
        let gzip = |data: &[u8]| {
            let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
            let _ = e.write_all(data);
            e.finish().unwrap_or_default()
        };
        let post = |coding: &str, body: Vec<u8>, cl: usize| {
            message(vec![
                ("method", TypedData::String("POST".into())),
                ("path", TypedData::String("/form".into())),
                (
                    "headers",
                    TypedData::Binary(hdrs(&[
                        ("Host", "example.com"),
                        ("Content-Type", "application/x-www-form-urlencoded"),
                        ("Content-Encoding", coding),
                        ("Content-Length", &cl.to_string()),
                    ])),
                ),
                ("body", TypedData::Binary(body)),
            ])
        };
        let attack = gzip(b"a=attack");
        let d = decide(&r, &post("gzip", attack.clone(), attack.len()), &log);
        assert_eq!((d.action, d.status, d.rule_id), ("deny", 403, 7));
        let fine = gzip(b"a=fine");
        let d = decide(&r, &post("gzip", fine.clone(), fine.len()), &log);
        assert_eq!(d.action, "allow");
        // Cut short by HAProxy's buffer: what decoded is inspected.
        let long = gzip(b"a=fine&b=fine&c=fine&d=fine");
        let cut = long[..long.len() - 5].to_vec();
        let d = decide(&r, &post("gzip", cut.clone(), long.len()), &log);
        assert_eq!(d.action, "allow");
        // ... to its last decodable byte: an attack there is seen.
        let long = gzip(b"a=fine&b=fine&c=fine&d=attack");
        let cut_attack = long[..long.len() - 5].to_vec();
        let d = decide(&r, &post("gzip", cut_attack, long.len()), &log);
        assert_eq!((d.action, d.status, d.rule_id), ("deny", 403, 7));
        // Cut short in the body the client sent: refused.
        let d = decide(&r, &post("gzip", cut.clone(), cut.len()), &log);
        assert_eq!((d.action, d.status, d.rule_id), ("deny", 400, 0));
        let d = decide(&r, &post("br", b"a=attack".to_vec(), 8), &log);
        assert_eq!((d.action, d.status, d.rule_id), ("deny", 415, 0));
    }
}
