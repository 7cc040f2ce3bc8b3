//! The accept loop of `strictly serve`: each TCP connection is served as HTTP/1.1 by hyper,
//! with a header-read timer, so a client that dribbles its request headers (slowloris) is
//! disconnected after [`ServerConfig::header_timeout`](super::ServerConfig) instead of holding a
//! socket and a task forever. (A body that dribbles is bounded by the request timeout, since
//! the body is read inside the handler.) Shutdown stops accepting and waits for the
//! connections in flight.

use std::future::Future;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Serves `app` on `listener` until `shutdown` resolves, then waits for open connections.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors and the like: wait a moment, keep serving.
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // Errors are the client's (reset, timed out, malformed): nothing to do.
            let _ = connection.await;
        });
    }
    graceful.shutdown().await;
}
