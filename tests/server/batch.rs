//! Batched decoding through the server: concurrent requests (greedy and seeded, free and
//! constrained, streamed and not, `n` > 1) stepped together by the batch thread give exactly
//! the outputs the same requests give run one at a time with `max_batch` 1; the `n` choices of
//! one request share passes and come back in index order; /metrics and
//! /health show the batching; a client that disconnects stops its batched sequence.

use strictly::model::{BatchStats, Batcher};

use super::*;
use crate::common::WATCHDOG;

/// Texts of every choice of a response (non-streamed), or of a stream's chunks.
fn texts(v: &Value) -> Vec<String> {
    v["choices"].as_array().unwrap().iter().map(|c| c["message"]["content"].as_str().unwrap().to_string()).collect()
}

fn streamed_texts(chunks: &[Value], n: usize) -> Vec<String> {
    let mut out = vec![String::new(); n];
    for c in chunks {
        for ch in c["choices"].as_array().unwrap() {
            if let Some(t) = ch["delta"]["content"].as_str() {
                out[ch["index"].as_u64().unwrap() as usize].push_str(t);
            }
        }
    }
    out
}

fn bodies() -> Vec<Value> {
    let stories = ["Tell me a story.", "Once upon a time", "What did the cat do?", "Tell me about Lily."];
    (0..8u64)
        .map(|i| {
            let mut b = json!({"messages": msgs(stories[i as usize % 4]), "max_tokens": 24 + i});
            if i % 2 == 0 {
                b["temperature"] = json!(0.0);
            } else {
                b["seed"] = json!(i);
            }
            match i % 4 {
                1 => b["regex"] = json!("[A-Z][a-z]+( [a-z]+){2,8}\\."),
                2 => b["response_format"] = json!({"type": "json_object"}),
                3 => b["n"] = json!(2),
                _ => {}
            }
            if i == 2 {
                b["max_tokens"] = json!(60);
            }
            b
        })
        .collect()
}

/// The texts of [`bodies`], sent all at once to the server at `addr` (with `speculate` set
/// where given).
async fn all_bodies_at_once(addr: std::net::SocketAddr, speculate: Option<&'static str>) -> Vec<Vec<String>> {
    let mut tasks = Vec::new();
    for mut b in bodies() {
        if let Some(s) = speculate {
            b["speculate"] = json!(s);
        }
        tasks.push(tokio::spawn(async move {
            let (s, v) = http_json(addr, "POST", "/v1/chat/completions", b).await;
            assert_eq!(s, 200, "{v}");
            texts(&v)
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(tokio::time::timeout(WATCHDOG, t).await.expect("hung").unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batched_requests_equal_unbatched_ones() {
    // One at a time, each generation on its own (candle's single-sequence llama).
    let alone = app(state(ServerConfig { max_batch: 1, ..ServerConfig::default() }));
    let mut expected = Vec::new();
    for b in bodies() {
        let (s, v) = post(&alone, "/v1/chat/completions", b.clone()).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        expected.push(texts(&v));
    }
    let (_, h) = call(&alone, "GET", "/health", None).await;
    assert_eq!(h["max_batch"], 1);

    // All at once over TCP, every other one streamed, stepped together by the batch thread.
    let st = state(ServerConfig { max_batch: 8, max_concurrent: 8, ..ServerConfig::default() });
    let addr = serve(st.clone()).await;
    let mut tasks = Vec::new();
    for (i, mut b) in bodies().into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let n = b["n"].as_u64().unwrap_or(1) as usize;
            if i % 2 == 0 {
                let (s, v) = http_json(addr, "POST", "/v1/chat/completions", b).await;
                assert_eq!(s, 200, "{v}");
                texts(&v)
            } else {
                b["stream"] = json!(true);
                streamed_texts(&sse(addr, "/v1/chat/completions", b).await, n)
            }
        }));
    }
    for (i, (t, want)) in tasks.into_iter().zip(&expected).enumerate() {
        let got = tokio::time::timeout(WATCHDOG, t).await.expect("hung: a request never finished").unwrap();
        assert_eq!(&got, want, "request {i}");
    }
    let (_, h) = http_json(addr, "GET", "/health", Value::Null).await;
    assert_eq!(h["max_batch"], 8);
    let (s, text) = Conn::open(addr, "GET", "/metrics", "").await.whole_body().await;
    assert_eq!(s, 200);
    let passes = metric_value(&text, "strictly_batch_size_count");
    let rows = metric_value(&text, "strictly_batch_size_sum");
    assert!(passes > 0.0 && rows > passes, "no pass stepped several sequences: {passes} passes, {rows} rows");
    assert_eq!(metric_value(&text, "strictly_batch_size_bucket{le=\"+Inf\"}"), passes);
    assert!(metric_value(&text, "strictly_batch_size_bucket{le=\"1\"}") < passes);
    assert_eq!(metric_value(&text, "strictly_max_batch"), 8.0);
    // The sequential server's passes are not batched: its histogram stays empty.
    let (_, text) = call_raw(&alone, "GET", "/metrics", Vec::new()).await;
    let text = String::from_utf8(text).unwrap();
    assert_eq!(metric_value(&text, "strictly_batch_size_count"), 0.0);
    assert_eq!(metric_value(&text, "strictly_max_batch"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_choices_of_one_request_share_passes() {
    let body = json!({"messages": msgs("Tell me a story."), "max_tokens": 30, "seed": 3, "n": 4});
    let alone = app(state(ServerConfig { max_batch: 1, ..ServerConfig::default() }));
    let (s, want) = post(&alone, "/v1/chat/completions", body.clone()).await;
    assert_eq!(s, StatusCode::OK, "{want}");
    let batched = app(state(ServerConfig::default()));
    let (s, got) = post(&batched, "/v1/chat/completions", body).await;
    assert_eq!(s, StatusCode::OK, "{got}");
    assert_eq!(texts(&got), texts(&want));
    assert_eq!(got["usage"], want["usage"]);
    let indexes: Vec<u64> = got["choices"].as_array().unwrap().iter().map(|c| c["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, [0, 1, 2, 3]);
    let (_, text) = call_raw(&batched, "GET", "/metrics", Vec::new()).await;
    let text = String::from_utf8(text).unwrap();
    let (passes, rows) =
        (metric_value(&text, "strictly_batch_size_count"), metric_value(&text, "strictly_batch_size_sum"));
    assert!(rows > passes, "the 4 choices never shared a pass: {passes} passes, {rows} rows");
}

/// The batched model, each forward pass delayed (so that a generation lasts long enough to be
/// interrupted), counting the sequences that exist.
struct SlowBatched {
    batcher: Arc<Batcher>,
    delay: Duration,
}

struct SlowSequence {
    inner: Box<dyn LanguageModel + Send>,
    delay: Duration,
}

impl LanguageModel for SlowSequence {
    fn logits_width(&self) -> usize {
        self.inner.logits_width()
    }
    fn forward(&mut self, tokens: &[TokenId], logits: &mut [f32]) -> strictly::Result<()> {
        std::thread::sleep(self.delay);
        self.inner.forward(tokens, logits)
    }
    fn fork(&self) -> strictly::Result<Box<dyn LanguageModel>> {
        Err(strictly::Error::state("no forks here"))
    }
}

impl ModelSource for SlowBatched {
    fn fresh(&self) -> strictly::Result<Box<dyn LanguageModel + Send>> {
        Ok(Box::new(SlowSequence { inner: self.batcher.fresh()?, delay: self.delay }))
    }
    fn batching(&self) -> Option<(usize, BatchStats)> {
        self.batcher.batching()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_stops_a_batched_generation() {
    let LoadedModel { model, env, prompt, defaults, info } = LoadedModel::embedded(&LoadOptions::default()).unwrap();
    let batcher = Arc::new(Batcher::new(model.batched().unwrap(), 8).unwrap());
    let source = Arc::new(SlowBatched { batcher: batcher.clone(), delay: Duration::from_millis(25) });
    let config = ServerConfig { max_concurrent: 2, max_queue: 0, ..ServerConfig::default() };
    let st = AppState::with_source(source, env, prompt, defaults, info, config);
    let addr = serve(st.clone()).await;
    let long = json!({"messages": msgs("Tell me a long story."), "max_tokens": 400, "stream": true, "seed": 1,
        "regex": "[a-z ]{400}"});
    let mut a = Conn::open(addr, "POST", "/v1/chat/completions", &long.to_string()).await;
    let mut b = Conn::open(addr, "POST", "/v1/chat/completions", &long.to_string()).await;
    assert_eq!((a.status, b.status), (200, 200));
    for _ in 0..3 {
        a.next_event().await.expect("an event");
        b.next_event().await.expect("an event");
    }
    assert_eq!((st.running(), batcher.live()), (2, 2));
    drop(a);
    wait_until("the batched sequence of the client that left to end", || batcher.live() <= 1).await;
    // The other one goes on, alone in its passes now.
    let before = batcher.stats().rows;
    for _ in 0..3 {
        b.next_event().await.expect("the other stream goes on");
    }
    assert!(batcher.stats().rows > before);
    drop(b);
    wait_until("both generations to free their slots", || st.running() == 0 && batcher.live() == 0).await;
    let stopped_at = batcher.stats().rows;
    assert!(stopped_at < 200, "{stopped_at} sequence steps: the generations were not stopped early");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(batcher.stats().rows, stopped_at, "passes went on after the clients left");
    // Both slots are free again, and the batch thread still serves.
    let (s, v) =
        http_json(addr, "POST", "/v1/chat/completions", json!({"messages": msgs("hi"), "max_tokens": 3})).await;
    assert_eq!(s, 200, "{v}");
    let (_, text) = Conn::open(addr, "GET", "/metrics", "").await.whole_body().await;
    assert_eq!(metric_value(&text, "strictly_generations_cancelled_total"), 2.0, "both disconnects seen: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_qwen2_model_batches_and_gives_the_unbatched_outputs() {
    use strictly::model::Arch;
    let dir = crate::model::scratch_dir("server-batch-qwen2");
    crate::model::write_tiny_model(&dir, Arch::Qwen2, true, 1, None);
    let load = || LoadedModel::from_dir(&dir, &LoadOptions::default()).unwrap();
    let prompts = ["Once upon a time", "The cat", "Lily went", "One day there was"];
    let body = |i: usize| {
        let mut b = json!({"prompt": prompts[i], "max_tokens": 10 + i, "temperature": 0.0});
        if i == 3 {
            b["regex"] = json!("[a-z ]+\\.");
        }
        b
    };
    let alone = app(AppState::new(load(), ServerConfig { max_batch: 1, ..ServerConfig::default() }));
    let mut expected = Vec::new();
    for i in 0..prompts.len() {
        let (s, v) = post(&alone, "/v1/completions", body(i)).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        expected.push(v["choices"][0]["text"].as_str().unwrap().to_string());
    }
    let st = AppState::new(load(), ServerConfig { max_batch: 4, max_concurrent: 4, ..ServerConfig::default() });
    let addr = serve(st).await;
    let tasks: Vec<_> = (0..prompts.len())
        .map(|i| {
            let b = body(i);
            tokio::spawn(async move { http_json(addr, "POST", "/v1/completions", b).await })
        })
        .collect();
    for (i, (t, want)) in tasks.into_iter().zip(&expected).enumerate() {
        let (s, v) = tokio::time::timeout(WATCHDOG, t).await.expect("hung: a request never finished").unwrap();
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["choices"][0]["text"].as_str().unwrap(), want, "request {i}");
    }
    let (_, h) = http_json(addr, "GET", "/health", Value::Null).await;
    assert_eq!(h["max_batch"], 4, "the qwen2 model is served batched: {h}");
    let (_, text) = Conn::open(addr, "GET", "/metrics", "").await.whole_body().await;
    assert!(metric_value(&text, "strictly_batch_size_count") > 0.0, "passes went through the batch thread");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `"speculate": "prompt-lookup"` (an extension): drafts verified in the shared batched passes
/// (a sequence's request carries its draft rows), the cache truncated on a miss; the same
/// texts as without it, greedy, seeded and constrained, several requests at once; a bad value
/// is a 400 naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speculation_through_the_batch_thread_changes_no_text() {
    let st = state(ServerConfig { max_batch: 8, max_concurrent: 8, ..ServerConfig::default() });
    let addr = serve(st.clone()).await;
    let plain = all_bodies_at_once(addr, None).await;
    let fast = all_bodies_at_once(addr, Some("prompt-lookup")).await;
    assert_eq!(fast, plain);
    // One long greedy story (stories260K repeats itself): fewer batched passes with drafts.
    let passes = |speculate: &'static str| async move {
        let st = state(ServerConfig { max_batch: 8, ..ServerConfig::default() });
        let addr = serve(st).await;
        let body = json!({"messages": msgs("Once upon a time"), "max_tokens": 150, "temperature": 0.0, "speculate": speculate});
        let (s, v) = http_json(addr, "POST", "/v1/chat/completions", body).await;
        assert_eq!(s, 200, "{v}");
        let (_, text) = Conn::open(addr, "GET", "/metrics", "").await.whole_body().await;
        (texts(&v), metric_value(&text, "strictly_batch_size_count"))
    };
    let (a, slow) = passes("off").await;
    let (b, quick) = passes("prompt-lookup").await;
    assert_eq!(a, b);
    assert!(quick < slow, "passes with drafts {quick}, without {slow}");
    let mut bad = bodies().remove(0);
    bad["speculate"] = json!("ngram");
    let (s, v) = http_json(addr, "POST", "/v1/chat/completions", bad).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["error"]["param"], "speculate", "{v}");
}

/// A server with a draft model (`ServerConfig::draft_model`, `serve --draft-model`: here the
/// embedded model drafting for itself) drafts for every request by default: the same texts as
/// without one (greedy, seeded and constrained, several requests at once), in fewer batched
/// passes; `"speculate": "off"` turns it off; `"draft-model"` on a server without one is a 400
/// naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_model_drafts_for_every_request_and_changes_no_text() {
    // On the batched network, whose cache can truncate (as `serve --draft-model` loads it).
    let net = LoadedModel::embedded(&LoadOptions::default()).unwrap().model.on_batch_net().unwrap();
    let draft_net = std::sync::Mutex::new(net);
    let draft = strictly::decode::DraftModel::new(move || {
        Ok(Box::new(draft_net.lock().unwrap_or_else(|p| p.into_inner()).restart()))
    });
    let with_draft = || ServerConfig { max_batch: 8, draft_model: Some(draft.clone()), ..ServerConfig::default() };
    let run = |config: ServerConfig, speculate: Option<&'static str>| async move {
        let addr = serve(state(config)).await;
        let out = all_bodies_at_once(addr, speculate).await;
        let (_, metrics) = Conn::open(addr, "GET", "/metrics", "").await.whole_body().await;
        (out, metric_value(&metrics, "strictly_batch_size_count"))
    };
    let (plain, plain_passes) = run(ServerConfig { max_batch: 8, ..ServerConfig::default() }, None).await;
    let (drafted, drafted_passes) = run(with_draft(), None).await;
    assert_eq!(drafted, plain);
    assert!(drafted_passes < plain_passes, "passes with drafts {drafted_passes}, without {plain_passes}");
    let (off, _) = run(with_draft(), Some("off")).await;
    assert_eq!(off, plain);
    let addr = serve(state(ServerConfig::default())).await;
    let mut bad = bodies().remove(0);
    bad["speculate"] = json!("draft-model");
    let (s, v) = http_json(addr, "POST", "/v1/chat/completions", bad).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["error"]["param"], "speculate", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("no draft model"), "{v}");
}
