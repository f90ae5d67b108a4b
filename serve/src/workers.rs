//! Worker threads, each with a single-threaded runtime, and the dispatcher
//! that hands them the connections it accepts: how `waf serve` spreads
//! connections over the CPUs.
//!
//! A connection, with everything done for it, stays on the worker it was
//! given, as in one of nginx's worker processes: the engine's per-thread
//! caches stay warm, and no idle worker is woken to steal work (what tokio's
//! multi-threaded scheduler does, at a futex wake and an inter-processor
//! interrupt each time). On this project's 2-core test machine, `waf serve`
//! with CRS served 10.4k → 12.7k requests per second when it moved from one
//! work-stealing runtime to workers (docs/serve.md, *Measured*).
//!
//! The dispatcher gives each connection to the worker serving the fewest
//! (the next one in turn on a tie): connections that clients keep open for
//! long (a load balancer's, a browser's) are spread evenly, which
//! accepting on every worker at once (whoever wakes first takes it) does
//! not.

use futures_util::FutureExt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

/// A connection accepted, and the listener it came from (which says, for
/// one, whether it speaks TLS).
type Accepted<L> = (std::net::TcpStream, SocketAddr, L);

/// A worker thread: where its connections are sent, and how many it serves.
struct Worker<L> {
    connections: UnboundedSender<Accepted<L>>,
    active: Arc<AtomicUsize>,
}

/// Running worker threads (they stop once this is dropped and their
/// connections have closed: a shutdown's requests in flight are answered).
/// `L` tells the worker which listener a connection came from.
pub(crate) struct Workers<L> {
    workers: Vec<Worker<L>>,
}

impl<L: Send + 'static> Workers<L> {
    /// Starts `n` worker threads named `{name}-{i}`. `setup` runs on each
    /// worker, inside its runtime (what it creates, such as an upstream
    /// connection pool, belongs to that runtime), and returns the function
    /// that serves one connection there.
    pub(crate) fn start<S, F, Fut>(n: usize, name: &str, setup: S) -> std::io::Result<Workers<L>>
    where
        S: Fn() -> F + Clone + Send + 'static,
        F: FnMut(TcpStream, SocketAddr, L) -> Fut + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut workers = Vec::with_capacity(n);
        for i in 0..n.max(1) {
            let (tx, mut rx) = unbounded_channel::<Accepted<L>>();
            let active = Arc::new(AtomicUsize::new(0));
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (counter, setup) = (active.clone(), setup.clone());
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        let mut serve = setup();
                        while let Some((stream, remote, from)) = rx.recv().await {
                            let Ok(stream) = TcpStream::from_std(stream) else {
                                counter.fetch_sub(1, Ordering::Relaxed);
                                continue;
                            };
                            let counter = counter.clone();
                            // A combinator, not an `async` block awaiting
                            // it: that would hold the connection's future
                            // twice (as a capture and as the awaited value),
                            // doubling an idle connection's memory.
                            tokio::spawn(serve(stream, remote, from).map(move |()| {
                                counter.fetch_sub(1, Ordering::Relaxed);
                            }));
                        }
                        // Every dispatcher is gone (the server stopped or is
                        // shutting down): the connections this worker serves
                        // finish first, as the runtime's end would cancel them.
                        while counter.load(Ordering::Relaxed) > 0 {
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        }
                    });
                })?;
            workers.push(Worker {
                connections: tx,
                active,
            });
        }
        Ok(Workers { workers })
    }
}

impl<L: Clone + Send + 'static> Workers<L> {
    /// Accepts connections on `listener` until the task is aborted, each
    /// handed, with `from`, to the worker serving the fewest (over every
    /// listener: the dispatchers of several share the workers).
    pub(crate) async fn dispatch(self: Arc<Self>, listener: TcpListener, from: L) {
        let n = self.workers.len();
        let mut next = 0;
        loop {
            let Ok((stream, remote)) = listener.accept().await else {
                continue;
            };
            let Ok(stream) = stream.into_std() else {
                continue;
            };
            let pick = least_busy(&self.workers, next);
            next = (pick + 1) % n;
            let w = &self.workers[pick];
            w.active.fetch_add(1, Ordering::Relaxed);
            if w.connections.send((stream, remote, from.clone())).is_err() {
                w.active.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// The worker with the fewest connections; on a tie, the first from `next`
/// on.
fn least_busy<L>(workers: &[Worker<L>], next: usize) -> usize {
    let n = workers.len();
    (0..n)
        .map(|k| (next + k) % n)
        .min_by_key(|&i| workers[i].active.load(Ordering::Relaxed))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Workers that answer each connection with their thread's name.
    fn name_echo(n: usize) -> Arc<Workers<&'static str>> {
        let workers = Workers::start(n, "test-worker", || {
            |mut stream: TcpStream, _, from: &'static str| async move {
                let name = format!("{}{from}", std::thread::current().name().unwrap_or("?"));
                let _ = stream.write_all(name.as_bytes()).await;
                // Held open until the client closes: the worker counts it.
                let mut buf = [0u8; 1];
                let _ = stream.read(&mut buf).await;
            }
        })
        .expect("workers start");
        Arc::new(workers)
    }

    #[tokio::test]
    async fn connections_held_open_are_spread_evenly() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let dispatcher = tokio::spawn(name_echo(3).dispatch(listener, ""));
        let mut held = Vec::new();
        let mut served_by = std::collections::BTreeMap::<String, usize>::new();
        for _ in 0..9 {
            let mut c = TcpStream::connect(addr).await.expect("connect");
            let mut name = vec![0u8; 64];
            let n = tokio::time::timeout(std::time::Duration::from_secs(5), c.read(&mut name))
                .await
                .expect("answered in time")
                .expect("read");
            *served_by
                .entry(String::from_utf8_lossy(&name[..n]).into_owned())
                .or_default() += 1;
            held.push(c);
        }
        let counts: Vec<usize> = served_by.values().copied().collect();
        assert_eq!(counts, [3, 3, 3], "{served_by:?}");
        dispatcher.abort();
    }

    #[tokio::test]
    async fn a_closed_connection_frees_its_place() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let dispatcher = tokio::spawn(name_echo(2).dispatch(listener, ""));
        let read_name = |mut c: TcpStream| async move {
            let mut name = vec![0u8; 64];
            let n = c.read(&mut name).await.expect("read");
            (c, String::from_utf8_lossy(&name[..n]).into_owned())
        };
        let (c1, a) = read_name(TcpStream::connect(addr).await.expect("connect")).await;
        let (_c2, b) = read_name(TcpStream::connect(addr).await.expect("connect")).await;
        let (c3, a2) = read_name(TcpStream::connect(addr).await.expect("connect")).await;
        assert_ne!(a, b, "two connections, two workers");
        assert_eq!(a2, a, "a tie goes to the next worker in turn");
        // The first worker serves two, the second one; both of the first's close.
        drop((c1, c3));
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let (_c4, d) = read_name(TcpStream::connect(addr).await.expect("connect")).await;
        assert_eq!(
            d, a,
            "the worker whose connections closed is the least busy"
        );
        dispatcher.abort();
    }

    #[tokio::test]
    async fn listeners_share_the_workers_and_say_where_a_connection_came_from() {
        let workers = name_echo(2);
        let (l1, l2) = (
            TcpListener::bind("127.0.0.1:0").await.expect("bind"),
            TcpListener::bind("127.0.0.1:0").await.expect("bind"),
        );
        let (a1, a2) = (
            l1.local_addr().expect("addr"),
            l2.local_addr().expect("addr"),
        );
        let d1 = tokio::spawn(workers.clone().dispatch(l1, "/plain"));
        let d2 = tokio::spawn(workers.dispatch(l2, "/tls"));
        let read_name = |addr| async move {
            let mut c = TcpStream::connect(addr).await.expect("connect");
            let mut name = vec![0u8; 64];
            let n = c.read(&mut name).await.expect("read");
            (c, String::from_utf8_lossy(&name[..n]).into_owned())
        };
        let (_c1, a) = read_name(a1).await;
        let (_c2, b) = read_name(a2).await;
        assert!(a.ends_with("/plain") && b.ends_with("/tls"), "{a} {b}");
        // The second listener's connection went to the other, idle, worker.
        assert_ne!(
            a.trim_end_matches("/plain"),
            b.trim_end_matches("/tls"),
            "the least busy worker over both listeners"
        );
        d1.abort();
        d2.abort();
    }
}
