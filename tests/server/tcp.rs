//! A real server on 127.0.0.1 (port 0) and a minimal HTTP/1.1 client for it, so the tests
//! see exactly the bytes a client sees: status line, chunked transfer, SSE framing.

use std::time::Duration;

use serde_json::Value;
use strictly::server::{app, AppState};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::WATCHDOG;

/// Polls `cond` every 10 ms until it holds. Not a speed limit: it gives up only after the
/// [`WATCHDOG`], saying that the test hung waiting for `what`.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let wait = async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(WATCHDOG, wait).await.unwrap_or_else(|_| panic!("hung: waited {WATCHDOG:?} for {what}"));
}

/// Serves `st` on 127.0.0.1, port 0; the server task ends with the test's runtime.
pub async fn serve(st: AppState) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app(st)).await.unwrap() });
    addr
}

/// A minimal HTTP/1.1 client: one request per connection, the body read as it comes
/// (chunked transfer decoded), SSE events split on blank lines.
pub struct Conn {
    stream: TcpStream,
    pub status: u16,
    chunked: bool,
    raw: Vec<u8>,
    body: Vec<u8>,
    eof: bool,
}

impl Conn {
    pub async fn open(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> Conn {
        let mut stream = tokio::time::timeout(WATCHDOG, TcpStream::connect(addr))
            .await
            .unwrap_or_else(|_| panic!("hung: connecting to {addr}"))
            .unwrap();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(req.as_bytes()).await.unwrap();
        let mut c = Conn { stream, status: 0, chunked: false, raw: Vec::new(), body: Vec::new(), eof: false };
        // Headers.
        let end = loop {
            if let Some(p) = c.raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break p;
            }
            assert!(c.read_more().await, "the connection closed before the headers");
        };
        let head = String::from_utf8_lossy(&c.raw[..end]).to_string();
        c.raw.drain(..end + 4);
        c.status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        c.chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
        c
    }

    async fn read_more(&mut self) -> bool {
        let mut buf = [0u8; 8192];
        let n = tokio::time::timeout(WATCHDOG, self.stream.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("hung: nothing read for {WATCHDOG:?}"))
            .unwrap();
        self.raw.extend_from_slice(&buf[..n]);
        n > 0
    }

    /// Moves decoded body bytes from `raw` to `body`; true at the body's end.
    fn decode(&mut self) -> bool {
        if !self.chunked {
            self.body.append(&mut self.raw);
            return self.eof;
        }
        loop {
            let Some(p) = self.raw.windows(2).position(|w| w == b"\r\n") else { return false };
            let size = usize::from_str_radix(String::from_utf8_lossy(&self.raw[..p]).trim(), 16).unwrap();
            if size == 0 {
                return true;
            }
            if self.raw.len() < p + 2 + size + 2 {
                return false;
            }
            self.body.extend_from_slice(&self.raw[p + 2..p + 2 + size]);
            self.raw.drain(..p + 2 + size + 2);
        }
    }

    /// The next SSE event's data (comments skipped), or None at the end of the body.
    pub async fn next_event(&mut self) -> Option<String> {
        loop {
            let ended = self.decode();
            if let Some(p) = self.body.windows(2).position(|w| w == b"\n\n") {
                let ev = String::from_utf8(self.body[..p].to_vec()).unwrap();
                self.body.drain(..p + 2);
                let data: Vec<&str> =
                    ev.lines().filter_map(|l| l.strip_prefix("data: ").or(l.strip_prefix("data:"))).collect();
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some(data.join("\n"));
            }
            if ended {
                return None;
            }
            if !self.read_more().await {
                self.eof = true;
            }
        }
    }

    pub async fn whole_body(mut self) -> (u16, String) {
        loop {
            if self.decode() {
                break;
            }
            if !self.read_more().await {
                self.eof = true;
                if !self.chunked {
                    self.decode();
                }
                break;
            }
        }
        (self.status, String::from_utf8(self.body).unwrap())
    }
}

pub async fn http_json(addr: std::net::SocketAddr, method: &str, path: &str, body: Value) -> (u16, Value) {
    let body = if body.is_null() { String::new() } else { body.to_string() };
    let (s, text) = Conn::open(addr, method, path, &body).await.whole_body().await;
    (s, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}")))
}

/// All the events of a stream, checking that it ends with [DONE]; the chunks parsed.
pub async fn sse(addr: std::net::SocketAddr, path: &str, body: Value) -> Vec<Value> {
    let mut c = Conn::open(addr, "POST", path, &body.to_string()).await;
    assert_eq!(c.status, 200);
    let mut out = Vec::new();
    let mut done = false;
    while let Some(data) = c.next_event().await {
        assert!(!done, "an event after [DONE]: {data}");
        if data == "[DONE]" {
            done = true;
            continue;
        }
        out.push(serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}")));
    }
    assert!(done, "the stream did not end with [DONE]: {out:?}");
    out
}
