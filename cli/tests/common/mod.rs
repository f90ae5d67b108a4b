//! What the CLI test files share: running the built `waf` binary.

use std::process::{Command, Output};

/// Runs `waf` with `args`, in the crate directory (fixture paths are relative to it).
pub fn waf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waf"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run waf")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts exit code 0, showing stdout and stderr otherwise.
#[allow(dead_code)] // not every test file checks a success this way
pub fn assert_success(o: &Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        stdout(o),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A backend for `waf serve` tests, on loopback: each of up to `n`
/// connections gets, once its request head is read and `delay` has passed,
/// `200` with `body`, then is closed.
#[allow(dead_code)]
pub fn backend(n: usize, delay: std::time::Duration, body: &'static str) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in listener.incoming().take(n) {
            let Ok(mut conn) = conn else { continue };
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            std::thread::sleep(delay);
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(answer.as_bytes());
        }
    });
    addr
}

/// `waf serve ARGS --listen ADDR` (an address free a moment ago), started
/// in the crate directory with standard error piped; returns once it
/// listens (panics after 20 s).
#[allow(dead_code)]
pub fn start_serve(args: &[&str]) -> (std::process::Child, String) {
    use std::time::{Duration, Instant};
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_waf"))
        .arg("serve")
        .args(args)
        .args(["--listen", &listen])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start waf serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&listen).is_err() {
        assert!(
            Instant::now() < deadline,
            "waf serve did not start listening"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, listen)
}

/// Sends `signal` (`TERM`, `HUP`, `USR1`...) to the process.
#[allow(dead_code)]
pub fn signal(child: &std::process::Child, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -{signal}");
}

/// SIGTERM, then waits up to 10 s for the exit (killed after that): the
/// exit code (`None` when it had to be killed) and what it wrote to
/// standard error.
#[allow(dead_code)]
pub fn stop(mut child: std::process::Child) -> (Option<i32>, String) {
    use std::io::Read;
    use std::time::{Duration, Instant};
    signal(&child, "TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    (code, stderr)
}

/// The status of [`get`]'s answer (0 if none).
#[allow(dead_code)]
pub fn status(listen: &str, target: &str) -> u16 {
    get(listen, target)
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// `GET target` on a new connection (`Connection: close`): the answer,
/// empty if there was none in 5 s.
#[allow(dead_code)]
pub fn get(listen: &str, target: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut c) = std::net::TcpStream::connect(listen) else {
        return String::new();
    };
    let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let _ = c.write_all(
        format!("GET {target} HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    let mut answer = String::new();
    let _ = c.read_to_string(&mut answer);
    answer
}

/// A `redis-server` of its own on a free loopback port (no persistence),
/// killed when dropped; `None` when `redis-server` is not installed
/// (`apt-get install redis-server`), unless `WAF_REQUIRE_REDIS` is set
/// (`.ci/run` installs it), which makes that a failure.
#[allow(dead_code)]
pub fn redis_server() -> Option<Redis> {
    let port = free_port();
    start_redis(port, &["--port".into(), port.to_string()])
}

/// A `redis-server` as [`redis_server`]'s that speaks TLS only, with a
/// certificate for `localhost` and `127.0.0.1` signed by a CA made here
/// with `openssl` (in `dir`): the server and the CA's PEM file. `None`
/// as for [`redis_server`], or when `openssl` is missing (a failure too
/// with `WAF_REQUIRE_REDIS`).
#[allow(dead_code)]
pub fn redis_server_tls(dir: &std::path::Path) -> Option<(Redis, std::path::PathBuf)> {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let steps: [Vec<&str>; 3] = [
        [
            &["req", "-x509", "-nodes", "-days", "1"][..],
            &ec,
            &[
                "-subj",
                "/CN=waf-test-ca",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
            ],
        ]
        .concat(),
        [
            &["req", "-nodes"][..],
            &ec,
            &[
                "-subj",
                "/CN=localhost",
                "-keyout",
                "redis.key",
                "-out",
                "redis.csr",
            ],
        ]
        .concat(),
        vec![
            "x509",
            "-req",
            "-in",
            "redis.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "san.ext",
            "-out",
            "redis.crt",
        ],
    ];
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .expect("write");
    for args in steps {
        let made = Command::new("openssl")
            .args(&args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if !made.as_ref().is_ok_and(|s| s.success()) {
            assert!(
                std::env::var_os("WAF_REQUIRE_REDIS").is_none(),
                "openssl {args:?}: {made:?} (WAF_REQUIRE_REDIS is set)"
            );
            eprintln!("skipped: openssl {args:?}: {made:?}");
            return None;
        }
    }
    let port = free_port();
    let file = |name: &str| dir.join(name).display().to_string();
    let args = [
        "--port".into(),
        "0".into(),
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        file("redis.crt"),
        "--tls-key-file".into(),
        file("redis.key"),
        "--tls-ca-cert-file".into(),
        file("ca.crt"),
        "--tls-auth-clients".into(),
        "no".into(),
    ];
    Some((start_redis(port, &args)?, dir.join("ca.crt")))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `redis-server ARGS` on loopback, without persistence, once `port`
/// accepts connections.
fn start_redis(port: u16, args: &[String]) -> Option<Redis> {
    use std::time::{Duration, Instant};
    let child = Command::new("redis-server")
        .args(args)
        .args(["--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var_os("WAF_REQUIRE_REDIS").is_none(),
                "redis-server: {e} (WAF_REQUIRE_REDIS is set)"
            );
            eprintln!("skipped: redis-server: {e} (apt-get install redis-server)");
            return None;
        }
    };
    let addr = format!("127.0.0.1:{port}");
    let redis = Redis { child, addr };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&redis.addr).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(redis)
}

/// See [`redis_server`].
#[allow(dead_code)]
pub struct Redis {
    child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
